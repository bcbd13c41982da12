#!/usr/bin/env python3
"""quants/ of every kind of source (issue 36), against llama.cpp's quantizer (the pinned
libllama, through ctypes): the sha256 of quants/NAME.gguf equals that of the file
llama_model_quantize() writes from the same tree's model.gguf, for a split model
(merged), a remote model by http:// (nginx), hf:// (HF_ENDPOINT at the same nginx) and
s3:// (s3rver, when installed), and model directories of a library (a file and a split
set). The source is the bundled model rewritten as F16 by llama.cpp.

Also: `ggufs --diff MODEL QUANT` on a mount's quant gives the report it gives of the
original and llama.cpp's own file; an already quantized model (Q8_0, Q4_0) lists only
the NAMEs llama.cpp makes without --allow-requantize, and with -o requantize every
NAME it makes with it, byte for byte; and the man page's fleet recipe: nginx serves a
mount's quants/, a second ggufs mounts http://HOST:PORT/quants/Q4_K_M.gguf and reads
the same sha256, its Range requests answered 206.

Usage: test_quant_sources.py GGUFS_BINARY. Skipped (77) without /dev/fuse or without
the installed node-llama-cpp package (unless GGUFS_REQUIRE_LLAMA is set)."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
import test_quant_plan as qp  # noqa: E402
from remote_common import (EnvMount, Nginx, env_without_token, gm, install,  # noqa: E402
                           public_root, split_gguf)
from s3rver import S3rver  # noqa: E402

# the NAMEs whose bytes are compared for every source (the others by size only)
NAMES = ("Q4_K_M", "Q6_K", "IQ4_XS", "Q8_0")


class QuantSources(qp.QuantCase):
    PREFIX = "ggufs-quant-src-"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.f16 = qp.tiny(cls.llama, cls.dir)
        cls.root = public_root()
        install(cls.f16, cls.root, "models/tiny-F16.gguf")
        install(cls.f16, cls.root, "owner/repo/resolve/main/tiny-F16.gguf")
        os.makedirs(os.path.join(cls.root, "split"))
        cls.shards = split_gguf(cls.f16, os.path.join(cls.root, "split"), "tiny", 3)
        cls.nginx = Nginx(cls.root).__enter__()
        cls.refs = {}

    @classmethod
    def tearDownClass(cls):
        cls.nginx.__exit__(None, None, None)
        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def reference(self, src, name, requantize=False):
        """llama.cpp's file of src for NAME (a path in the scratch folder), or None when
        it makes none."""
        out = os.path.join(self.dir, "ref-%s.gguf" % name)
        if os.path.exists(out):
            os.unlink(out)
        return out if self.llama.quantize(src, out, qp.FTYPE[name], requantize) == 0 else None

    def check_quants(self, quants, model, names=NAMES):
        """quants/ beside model (a tree's model.gguf): each NAME of names is the sha256
        of llama.cpp's file of model, and llama.cpp's size."""
        for name in names:
            ref = self.reference(model, name)
            self.assertIsNotNone(ref, name)
            path = os.path.join(quants, name + ".gguf")
            self.assertEqual(os.stat(path).st_size, os.path.getsize(ref), name)
            self.assertEqual(qp.sha256_file(path), qp.sha256_file(ref), name)

    def test_split(self):
        """A split model, given by its middle shard: quants of the merged model.gguf,
        which are those of the unsplit file (gguf-split keeps keys and tensor order)."""
        with gm.Mount(self.shards[1]) as m:
            self.check_quants(m.p("quants"), m.p("model.gguf"))
            ref = self.reference(self.f16, "Q4_K_M")
            self.assertEqual(qp.sha256_file(m.p("quants", "Q4_K_M.gguf")), qp.sha256_file(ref))

    def test_http(self):
        """A remote model by URL, single and split."""
        url = self.nginx.url
        with EnvMount(url + "/models/tiny-F16.gguf") as a, \
                EnvMount(url + "/split/tiny-00003-of-00003.gguf") as b:
            for m in (a, b):
                self.check_quants(m.p("quants"), m.p("model.gguf"))

    def test_hf(self):
        """hf://OWNER/REPO/FILE, HF_ENDPOINT at the nginx that serves its resolve/ URL."""
        env = env_without_token(HF_ENDPOINT=self.nginx.url)
        with EnvMount("hf://owner/repo/tiny-F16.gguf", env=env) as m:
            self.check_quants(m.p("quants"), m.p("model.gguf"), ("Q4_K_M", "Q4_0"))

    def test_s3(self):
        """s3://BUCKET/KEY from s3rver, a single file and a split set."""
        gm.require(self, "s3rver", S3rver.missing())
        with S3rver(["models"]) as s:
            s.put("models", "tiny/tiny-F16.gguf", gm.read_file(self.f16))
            for p in self.shards:
                s.put("models", "split/" + os.path.basename(p), gm.read_file(p))
            env = s.env(self.dir)
            with EnvMount("s3://models/tiny/tiny-F16.gguf", env=env) as a, \
                    EnvMount("s3://models/split/tiny-00001-of-00003.gguf", env=env) as b:
                for m in (a, b):
                    self.check_quants(m.p("quants"), m.p("model.gguf"), ("Q4_K_M", "Q6_K"))

    def test_library(self):
        """Model directories of a local library: a file in a folder and a split set."""
        with gm.Mount(self.root) as lib:
            for rel in (("models", "tiny-F16"), ("split", "tiny")):
                d = lib.p(*rel)
                self.check_quants(os.path.join(d, "quants"), os.path.join(d, "model.gguf"))

    def test_diff(self):
        """ggufs --diff of model.gguf and quants/Q4_K_M.gguf: the report of the original
        file and llama.cpp's own Q4_K_M, line for line; its model line counts every
        tensor, the quant's bytes and the bits per weight quants.tsv gives."""
        ref = self.reference(self.f16, "Q4_K_M")
        want = subprocess.run([gm.GGUFS, "--diff", self.f16, ref], stdout=subprocess.PIPE,
                              check=True).stdout.decode()
        with gm.Mount(self.f16) as m:
            r = subprocess.run([gm.GGUFS, "--diff", m.p("model.gguf"),
                                m.p("quants", "Q4_K_M.gguf")], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, check=False)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(m.p("quants", "quants.tsv")) as f:
                row = [line.split("\t") for line in f if line.startswith("Q4_K_M\t")][0]
        got = r.stdout.decode()
        self.assertEqual(got, want)
        model = dict(w.split("=", 1) for w in got.splitlines()[-1].split("\t")[1:])
        n_tensors = len(qp.parse_infos(gm.read_file(ref)))
        self.assertEqual(int(model["tensors"]), n_tensors)
        self.assertEqual("%.4f" % float(model["bpw_b"]), row[3])
        self.assertEqual("%.4f" % (int(model["bytes_b"]) * 8 / int(model["elements"])), row[3])
        self.assertGreater(float(model["rel_rmse"]), 0)
        self.assertLess(float(model["rel_rmse"]), 0.2)
        self.assertEqual(model["nonfinite"], "0")

    def test_requantize(self):
        """A model whose 2-D weights are quantized (Q8_0 and Q4_0, made by llama.cpp):
        quants/ lists only the NAMEs llama.cpp makes without --allow-requantize and
        quants.tsv says why the others are not there; with -o requantize, the NAMEs it
        makes with it, each byte for byte its file (allow_requantize set)."""
        for src_name in ("Q8_0", "Q4_0"):
            src = os.path.join(self.dir, "src-%s.gguf" % src_name)
            assert self.llama.quantize(self.f16, src, qp.FTYPE[src_name]) == 0
            plain = {n for n, _ in qp.NAMES if self.reference(src, n)}
            allowed = {n for n, _ in qp.NAMES if self.reference(src, n, requantize=True)}
            self.assertLess(plain, allowed)
            self.assertIn(src_name, plain)   # the same types again: llama.cpp copies
            with self.subTest(source=src_name), gm.Mount(src) as m:
                self.assertEqual(set(os.listdir(m.p("quants"))),
                                 {n + ".gguf" for n in plain} | {"quants.tsv"})
                with open(m.p("quants", "quants.tsv")) as f:
                    text = f.read()
                self.assertIn("-o requantize", text)
                for n in allowed - plain:
                    self.assertIn("# %s: not made: requantizing from type" % n, text)
            with self.subTest(source=src_name, opt="requantize"), \
                    gm.Mount(src, ["-o", "requantize"]) as m:
                self.assertEqual(set(os.listdir(m.p("quants"))),
                                 {n + ".gguf" for n in allowed} | {"quants.tsv"})
                with open(m.p("quants", "quants.tsv")) as f:
                    self.assertNotIn("-o requantize", f.read())
                for n in ("F16", "Q4_K_M", "Q6_K", "Q8_0", "Q4_0", "IQ4_XS", "Q2_K"):
                    ref = self.reference(m.p("model.gguf"), n, requantize=True)
                    self.assertEqual(qp.sha256_file(m.p("quants", n + ".gguf")),
                                     qp.sha256_file(ref), n)

    def test_requantize_library_and_edits(self):
        """-o requantize reaches a library's models and the trees of edits."""
        src = os.path.join(self.dir, "src-lib-Q8_0.gguf")
        assert self.llama.quantize(self.f16, src, qp.FTYPE["Q8_0"]) == 0
        lib = tempfile.mkdtemp(prefix="ggufs-quant-lib-", dir=self.dir)
        shutil.copyfile(src, os.path.join(lib, "m.gguf"))
        with gm.Mount(lib, ["-o", "requantize"]) as m:
            self.assertTrue(os.path.exists(m.p("m", "quants", "Q4_K_M.gguf")))
            ref = self.reference(m.p("m", "model.gguf"), "Q4_K_M", requantize=True)
            self.assertEqual(qp.sha256_file(m.p("m", "quants", "Q4_K_M.gguf")),
                             qp.sha256_file(ref))
        edits = os.path.join(self.dir, "edits.json")
        with gm.Mount(src, ["-o", "requantize,edits=" + edits]) as m:
            gm.put(m.p("metadata", "general.name"), b"edited\n")
            ref = self.reference(m.p("model.gguf"), "Q4_0", requantize=True)
            self.assertEqual(qp.sha256_file(m.p("quants", "Q4_0.gguf")), qp.sha256_file(ref))

    def test_fleet(self):
        """The man page's recipe: nginx serves a mount's quants/ (Range requests), and a
        second ggufs mounts a quant by URL: its model.gguf is llama.cpp's file."""
        ref = self.reference(self.f16, "Q4_K_M")
        with gm.Mount(self.f16) as m, Nginx(m.path) as served:
            url = served.url + "/quants/Q4_K_M.gguf"
            with EnvMount(url) as far:
                self.assertEqual(qp.sha256_file(far.p("model.gguf")), qp.sha256_file(ref))
            records = served.records_settled(1)
            ranged = [r for r in records if r.path == "/quants/Q4_K_M.gguf" and r.range]
            self.assertTrue(ranged, records)
            self.assertTrue(all(r.status == 206 for r in ranged), ranged)


if __name__ == "__main__":
    qp.mount_test_main()
