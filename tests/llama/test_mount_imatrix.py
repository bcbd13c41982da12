#!/usr/bin/env python3
"""quants/ of a mount with -o imatrix=FILE against `llama-quantize --imatrix FILE` itself
(issue 46; the pinned source's tool, built by llama_tools.py): quants/IQ2_XXS, IQ1_M,
IQ3_XXS, Q4_K_M, Q4_0 and F16 of the mount have the sha256 of the files llama-quantize
writes, under the GGUF matrix and the .dat llama-imatrix writes of the test model
(FILE given as a relative path, and as one past the 127 bytes quantize.imatrix.file
keeps), a random llama of 896-wide rows (the legacy types' fallbacks, which take a sum
over the whole row) and a mixture of 8 experts with a count of 0. Without the option
the nine NAMEs that need a matrix are absent and quants.tsv says why; a matrix that
llama-quantize refuses refuses the mount in one line naming FILE; the disk cache never
serves a piece made under a matrix to a mount without it, nor the other way round.

    python3 tests/llama/test_mount_imatrix.py GGUFS CACHE_DIR [unittest args]

Skipped (77) without the package, g++ or /dev/fuse, unless GGUFS_REQUIRE_LLAMA is set:
there it fails."""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "quant"))
sys.path.insert(0, os.path.join(HERE, "..", "mount"))
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
import ggufs_mount as gm  # noqa: E402
import llama_tools  # noqa: E402
import servers  # noqa: E402
import test_quant_imatrix as tqi  # noqa: E402  (the models and matrices)
import test_quant_plan as qp  # noqa: E402

TOOLS = None
NAMES = ["IQ2_XXS", "IQ1_M", "IQ3_XXS", "Q4_K_M", "Q4_0", "F16"]
SMALL = ["Q4_0", "Q4_K_M", "IQ2_XXS"]   # for the random models


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def counters(path):
    return tuple(int(os.getxattr(path, "user.ggufs.blocks_" + k))
                 for k in ("computed", "from_disk", "stored"))


class MountImatrix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ggufs-mount-imatrix-")
        os.chmod(cls.tmp, 0o755)
        d = cls.tmp
        cls.quantize = TOOLS.build("quantize")
        cls.imatrix = TOOLS.build("imatrix")
        cls.many = TOOLS.build("quantize_many", extra=os.path.join(HERE, "quantize_many.cpp"),
                               with_dir="tools/quantize")
        cls.f16 = os.path.join(d, "tiny-F16.gguf")
        subprocess.run([cls.quantize, "--allow-requantize", tqi.MODEL, cls.f16, "F16", "2"],
                       env=TOOLS.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True, timeout=600)
        text = os.path.join(d, "calib.txt")
        words = "a quick brown fox jumps over the lazy dog and learns to count one two".split()
        with open(text, "w") as f:
            f.write(" ".join(words[(i * 5 + i // 7) % len(words)] for i in range(3000)))
        cls.real = {}
        for fmt in ("gguf", "dat"):
            out = os.path.join(d, "tiny-imatrix." + fmt)
            subprocess.run([cls.imatrix, "-m", cls.f16, "-f", text, "-c", "128", "--chunks", "3",
                            "-t", "2", "-o", out, "--output-format", fmt], env=TOOLS.env(),
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=300)
            cls.real[fmt] = out
        cls.wide = os.path.join(d, "rand-896.gguf")
        qp.random_llama(cls.wide, seed=11, n_embd=896, n_ff=128, n_layer=1, n_head=7,
                        n_head_kv=1, n_vocab=64, gtype=qp.F16)
        cls.moe = os.path.join(d, "rand-moe.gguf")
        qp.random_llama(cls.moe, seed=12, n_embd=256, n_ff=64, n_layer=1, n_head=4,
                        n_head_kv=1, n_vocab=64, gtype=qp.F16, n_expert=8)
        cls.same = 0

    @classmethod
    def tearDownClass(cls):
        print("\nquants/ files with llama-quantize --imatrix's sha256: %d" % cls.same,
              file=sys.stderr)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def references(self, jobs, cwd):
        """llama-quantize's files for each (imatrix, model, name) of jobs (imatrix as
        given, from cwd; None: without a matrix), run in one process: their sha256, or
        None where it refused."""
        status = os.path.join(self.tmp, "status")
        outs = [os.path.join(self.tmp, "ref-%d.gguf" % i) for i in range(len(jobs))]
        lines = "".join("\t".join((["--imatrix", im] if im else []) +
                                  [model, out, name, "2"]) + "\n"
                        for (im, model, name), out in zip(jobs, outs))
        subprocess.run([self.many, status], input=lines.encode(), env=TOOLS.env(), cwd=cwd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1500,
                       check=True)
        with open(status) as f:
            codes = [int(x) for x in f.read().split()]
        self.assertEqual(len(codes), len(jobs))
        sums = []
        for rc, out in zip(codes, outs):
            sums.append(sha256(out) if rc == 0 else None)
            if os.path.exists(out):
                os.unlink(out)
        return sums

    def check(self, model, imatrix, names, cwd=None):
        """quants/NAME.gguf of model mounted with -o imatrix=imatrix (as given, from
        cwd) has llama-quantize --imatrix's sha256, for each of names."""
        cwd = cwd or self.tmp
        want = self.references([(imatrix, model, n) for n in names], cwd)
        mnt = gm.Mount(os.path.abspath(model), ["-o", "imatrix=" + imatrix,
                                                "-o", "cache_dir=none"])
        old = os.getcwd()
        os.chdir(cwd)   # FILE as given: relative to where ggufs starts
        try:
            mnt.__enter__()
        finally:
            os.chdir(old)
        try:
            listed = os.listdir(mnt.p("quants"))
            for name, sha in zip(names, want):
                with self.subTest(model=os.path.basename(model), imatrix=imatrix, name=name):
                    self.assertIsNotNone(sha, "llama-quantize refused")
                    self.assertIn(name + ".gguf", listed)
                    self.assertEqual(sha256(mnt.p("quants", name + ".gguf")), sha)
                    type(self).same += 1
        finally:
            mnt.__exit__(None, None, None)

    def test_real_gguf_matrix(self):
        # FILE relative, as llama-quantize is given it
        self.check(self.f16, os.path.basename(self.real["gguf"]), NAMES)

    def test_real_dat_matrix_long_name(self):
        # FILE past quantize.imatrix.file's 127 bytes: cut as strncpy cuts it
        deep = os.path.join(self.tmp, "d" * 60, "e" * 60)
        os.makedirs(deep, exist_ok=True)
        long = os.path.join(deep, "tiny-imatrix.dat")
        shutil.copy(self.real["dat"], long)
        self.assertGreater(len(long), 127)
        self.check(self.f16, long, NAMES)

    def test_remote_matrix(self):
        # FILE an http:// URL, read as a model's bytes are; llama-quantize is given the
        # same text, which as a relative path names a local copy
        root = os.path.join(self.tmp, "served")
        os.makedirs(root, exist_ok=True)
        os.chmod(root, 0o755)
        shutil.copy(self.real["gguf"], os.path.join(root, "m.imatrix"))
        with servers.Nginx(root) as n:
            url = n.url + "/m.imatrix"
            local = os.path.join(self.tmp, url.replace("//", "/"))
            os.makedirs(os.path.dirname(local), exist_ok=True)
            shutil.copy(self.real["gguf"], local)
            self.check(self.f16, url, ["Q4_K_M", "IQ2_XXS"])

    def test_wide_rows(self):
        im = tqi.matrix(os.path.join(self.tmp, "wide.imatrix"), self.wide, 1)
        self.check(self.wide, im, SMALL + ["Q5_1"])

    def test_experts(self):
        im = tqi.matrix(os.path.join(self.tmp, "moe.imatrix"), self.moe, 2, zero_counts=True)
        self.check(self.moe, im, SMALL + ["Q4_1"])

    def test_absent_without_option(self):
        with gm.Mount(self.f16, ["-o", "cache_dir=none"]) as m:
            listed = set(os.listdir(m.p("quants")))
            with open(m.p("quants", "quants.tsv")) as f:
                tsv = f.read()
        for name in tqi.NEED_MATRIX:
            self.assertNotIn(name + ".gguf", listed)
            self.assertIn("# %s: not made: this quantization requires an imatrix!" % name, tsv)
        self.assertIn("Q4_K_M.gguf", listed)
        self.assertIn("\n# these need an importance matrix: llama-quantize makes them with "
                      "--imatrix FILE, ggufs with -o imatrix=FILE\n", tsv)
        # with it, all nine are listed, and none is said to need one
        with gm.Mount(self.f16, ["-o", "imatrix=" + self.real["gguf"],
                                 "-o", "cache_dir=none"]) as m:
            listed = set(os.listdir(m.p("quants")))
            with open(m.p("quants", "quants.tsv")) as f:
                tsv = f.read()
        for name in tqi.NEED_MATRIX:
            self.assertIn(name + ".gguf", listed)
        self.assertNotIn("need an importance matrix", tsv)

    def test_missing_entry_said(self):
        # no weights for ffn_up: IQ2_XXS is refused, and quants.tsv says why
        ups = [n for n, _, _ in tqi.weights_of(self.f16) if "ffn_up" in n]
        im = tqi.matrix(os.path.join(self.tmp, "no-up.imatrix"), self.f16, 3, skip=ups)
        with gm.Mount(self.f16, ["-o", "imatrix=" + im, "-o", "cache_dir=none"]) as m:
            listed = set(os.listdir(m.p("quants")))
            with open(m.p("quants", "quants.tsv")) as f:
                tsv = f.read()
        self.assertNotIn("IQ2_XXS.gguf", listed)
        self.assertIn("Q4_K_M.gguf", listed)
        self.assertIn("# IQ2_XXS: not made: ", tsv)

    def test_bad_matrix_refuses(self):
        bad = os.path.join(self.tmp, "bad.imatrix")
        with open(bad, "wb") as f:
            f.write(b"\x02\x00\x00\x00garbage")
        names = [n for n, _, _ in tqi.weights_of(self.f16)]
        inf = tqi.matrix(os.path.join(self.tmp, "inf.imatrix"), self.f16, 6, poison=names[-1])
        missing = os.path.join(self.tmp, "no-such.imatrix")
        for path in (bad, inf, missing, self.tmp):
            with self.subTest(path=os.path.basename(path)):
                err = gm.refused_mount(["-o", "imatrix=" + path, self.f16])
                self.assertIn(path, err)

    def test_cache_keeps_matrix_apart(self):
        cache = os.path.join(self.tmp, "cache")
        im = self.real["gguf"]
        ref_with, ref_without = self.references([(im, self.f16, "Q4_K_M"),
                                                 (None, self.f16, "Q4_K_M")], self.tmp)
        self.assertNotEqual(ref_with, ref_without)
        with_m = ["-o", "imatrix=" + im, "-o", "cache_dir=" + cache]
        without = ["-o", "cache_dir=" + cache]
        # each order: a mount never serves the other's pieces, then its own come from disk
        for first, second, want1, want2 in ((with_m, without, ref_with, ref_without),
                                            (without, with_m, ref_without, ref_with)):
            shutil.rmtree(cache, ignore_errors=True)
            for opts, want, computes in ((first, want1, True), (second, want2, True),
                                         (first, want1, False), (second, want2, False)):
                with gm.Mount(self.f16, opts) as m:
                    path = m.p("quants", "Q4_K_M.gguf")
                    self.assertEqual(sha256(path), want)
                    computed = counters(path)[0]
                    if computes:
                        self.assertGreater(computed, 0)
                    else:
                        self.assertEqual(computed, 0)


def main():
    global TOOLS
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    cache = sys.argv.pop(2)
    TOOLS = llama_tools.LlamaTools(cache)
    missing = None if TOOLS.available() else "no node-llama-cpp package or g++"
    gm.main("llama", missing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
