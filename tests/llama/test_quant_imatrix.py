#!/usr/bin/env python3
"""quants/NAME.gguf under an importance matrix against llama-quantize itself (issue 46):
for every NAME llama-quantize knows (the 26 and the 9 that need a matrix), the file
ggufs plans and quantizes (quant_plan_dump MODEL NAME OUT imatrix=FILE: quant_plan.h,
quant_read.h, lib/2-quant's weighted quantizers) and the file `llama-quantize --imatrix
FILE MODEL OUT NAME` writes (the pinned source's tool, built by llama_tools.py) are made
or refused alike, and when made are equal byte for byte: the header with its
quantize.imatrix.* keys, the type choices a matrix changes, every block.

The models and matrices: the bundled model as F16 with the matrices llama-imatrix
writes of it (GGUF and .dat); a random llama of 896-wide rows (not whole 256-blocks:
the legacy fallbacks, which take a sum over the whole row) and a mixture of 8 experts
(one row of weights per expert, counts of 0 among them), with matrices made here; and
matrices llama-quantize refuses or that change nothing: an entry missing for a tensor
whose type needs one, an entry of the wrong size (but for the token embeddings, which
then go without), a non-finite weight, a matrix with no entries (no matrix at all).

    python3 tests/llama/test_quant_imatrix.py BUILD/tests/quant_plan_dump CACHE_DIR [NAME ...]

Skipped (77) without the package or g++, unless GGUFS_REQUIRE_LLAMA is set: there it
fails."""
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "quant"))
import llama_tools  # noqa: E402
import test_quant_plan as qp  # noqa: E402  (random_llama, parse_infos)
from test_imatrix_file import gguf, meta, T_F32, f32s  # noqa: E402

DATA = os.environ.get("GGUFS_TEST_DATA", os.path.join(HERE, "..", "data"))
MODEL = os.path.join(DATA, "tinyllama-q4km.gguf")
NAMES = ["F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q5_1", "Q5_0", "Q4_K_M",
         "Q4_K_S", "Q4_1", "Q4_0", "Q3_K_L", "Q3_K_M", "Q3_K_S", "Q2_K", "IQ4_XS", "IQ4_NL",
         "IQ3_M", "IQ3_S", "TQ2_0", "TQ1_0", "MXFP4_MOE", "Q2_0", "Q1_0",
         "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M", "Q2_K_S", "IQ3_XS", "IQ3_XXS"]
NEED_MATRIX = NAMES[26:]
# where a matrix changes most: the legacy types' row sums, the K-quants, the i-quants
SOME = ["Q4_0", "Q5_1", "Q4_K_M", "Q2_K_S", "IQ2_XXS", "IQ1_M", "IQ3_XXS"]
DUMP = None
TOOLS = None


def weights_of(model):
    """The tensors a matrix covers (2-D and 3-D weights): [(name, ne0, n_expert)]."""
    with open(model, "rb") as f:
        data = f.read()
    return [(name, dims[0], dims[2] if len(dims) > 2 else 1)
            for name, dims, _, _ in qp.parse_infos(data) if len(dims) >= 2]


def matrix(path, model, seed, skip=(), resize=(), poison=None, zero_counts=False):
    """A GGUF matrix for model's weights: sums over decades, counts per expert (some 0
    with zero_counts); skip: names left out; resize: names given one value too many;
    poison: a name whose first sum is infinite."""
    rng = numpy.random.default_rng(seed)
    tensors = []
    for name, ne0, n_exp in weights_of(model):
        if name in skip:
            continue
        n = ne0 * n_exp + (1 if name in resize else 0)
        sums = (rng.lognormal(0.0, 2.0, n) * 50.0).astype(numpy.float32)
        if name == poison:
            sums[0] = numpy.inf
        counts = rng.integers(1, 40, n_exp).astype(numpy.float32) * 16
        if zero_counts and n_exp > 1:
            counts[1] = 0
        dims = [ne0, n_exp] if n % ne0 == 0 else [n]
        tensors += [(name + ".in_sum2", dims, T_F32, sums.tobytes()),
                    (name + ".counts", [n_exp], T_F32, counts.tobytes())]
    with open(path, "wb") as f:
        f.write(gguf(meta(chunks=7, size=256, datasets=("made-up.txt",)), tensors))
    return path


class QuantImatrix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ggufs-quant-imatrix-")
        d = cls.tmp.name
        cls.quantize = TOOLS.build("quantize")
        cls.imatrix = TOOLS.build("imatrix")
        cls.many = TOOLS.build("quantize_many", extra=os.path.join(HERE, "quantize_many.cpp"),
                               with_dir="tools/quantize")
        cls.f16 = os.path.join(d, "tiny-F16.gguf")
        cls.run_quantize(["--allow-requantize", MODEL, cls.f16, "F16"])
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
        cls.made = 0

    @classmethod
    def tearDownClass(cls):
        print("\nfiles byte for byte llama-quantize --imatrix's: %d" % cls.made, file=sys.stderr)
        cls.tmp.cleanup()

    @classmethod
    def run_quantize(cls, args):
        return subprocess.run([cls.quantize] + args + ["2"], env=TOOLS.env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)

    def references(self, jobs):
        """llama-quantize's exit status for each (imatrix, model, out, name) of jobs, run
        in one process (quantize_many: ggml builds its grids once)."""
        status = os.path.join(self.tmp.name, "status")
        lines = "".join("\t".join(["--imatrix", im, model, out, name, "2"]) + "\n"
                        for im, model, out, name in jobs)
        subprocess.run([self.many, status], input=lines.encode(), env=TOOLS.env(),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1200,
                       check=True)
        with open(status) as f:
            return [int(x) for x in f.read().split()]

    def check(self, model, imatrix, names=None, expect_made=None):
        """Every NAME (or names) of model under imatrix: made or refused alike, equal
        when made. expect_made: whether llama-quantize makes each (a dict, or one bool)."""
        names = [n for n in names or NAMES if not ONLY or n in ONLY]
        refs = [os.path.join(self.tmp.name, "ref-%s.gguf" % n) for n in names]
        status = self.references([(imatrix, model, r, n) for r, n in zip(refs, names)])
        self.assertEqual(len(status), len(names))
        for name, ref, rc in zip(names, refs, status):
            with self.subTest(model=os.path.basename(model), imatrix=os.path.basename(imatrix),
                              name=name):
                ours = os.path.join(self.tmp.name, "ours.gguf")
                o = subprocess.run([DUMP, model, name, ours, "imatrix=" + imatrix],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
                if expect_made is not None:
                    want = expect_made if isinstance(expect_made, bool) else expect_made[name]
                    self.assertEqual(rc == 0, want, "llama-quantize's exit status %d" % rc)
                if rc != 0:
                    self.assertEqual(o.returncode, 3, "ggufs made a file llama-quantize refuses")
                    continue
                self.assertEqual(o.returncode, 0, o.stderr.decode(errors="replace"))
                with open(ref, "rb") as a, open(ours, "rb") as b:
                    want, got = a.read(), b.read()
                os.unlink(ref)
                self.assertEqual(len(want), len(got))
                if want != got:
                    first = next(i for i in range(len(want)) if want[i] != got[i])
                    self.fail("first differing byte at %d of %d" % (first, len(want)))
                type(self).made += 1

    def test_real_matrices(self):
        self.check(self.f16, self.real["gguf"], expect_made=True)
        self.check(self.f16, self.real["dat"], names=["Q4_K_M", "IQ2_XXS"], expect_made=True)

    def test_wide_rows(self):
        self.check(self.wide, matrix(os.path.join(self.tmp.name, "wide.imatrix"), self.wide, 1),
                   names=SOME)

    def test_experts(self):
        self.check(self.moe, matrix(os.path.join(self.tmp.name, "moe.imatrix"), self.moe, 2,
                                    zero_counts=True), names=SOME)

    def test_refusals(self):
        d = self.tmp.name
        names = [n for n, _, _ in weights_of(self.f16)]
        ffn_up = [n for n in names if "ffn_up" in n]
        # no weights for ffn_up: a NAME that quantizes it to a type needing them refuses
        self.check(self.f16, matrix(os.path.join(d, "no-up.imatrix"), self.f16, 3, skip=ffn_up),
                   names=["IQ2_XXS", "IQ1_S", "Q4_K_M"],
                   expect_made={"IQ2_XXS": False, "IQ1_S": False, "Q4_K_M": True})
        # an entry of another size refuses every NAME that converts its tensor, but the
        # token embeddings', which go without
        self.check(self.f16, matrix(os.path.join(d, "size.imatrix"), self.f16, 4,
                                    resize=["blk.0.attn_q.weight"]),
                   names=["Q4_K_M", "IQ2_XS"], expect_made=False)
        self.check(self.f16, matrix(os.path.join(d, "embd.imatrix"), self.f16, 5,
                                    resize=["token_embd.weight"]),
                   names=["Q4_K_M", "Q8_0", "IQ3_XXS"], expect_made=True)
        # one weight not finite: nothing is made
        self.check(self.f16, matrix(os.path.join(d, "inf.imatrix"), self.f16, 6,
                                    poison=names[-1]),
                   names=["F16", "Q4_K_M", "IQ2_M"], expect_made=False)
        # no entries: no matrix at all (no keys), the NAMEs that need one refused
        empty = os.path.join(d, "empty.imatrix")
        with open(empty, "wb") as f:
            f.write(gguf(meta(), [("token_embd.weight", [4], T_F32, f32s([1, 2, 3, 4]))]))
        self.check(self.f16, empty, names=["Q4_K_M", "IQ3_XXS", "IQ2_XXS"],
                   expect_made={"Q4_K_M": True, "IQ3_XXS": False, "IQ2_XXS": False})


ONLY = None


def main():
    global DUMP, TOOLS, ONLY
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    DUMP, cache = sys.argv.pop(1), sys.argv.pop(1)
    names = [a for a in sys.argv[1:] if not a.startswith("-") and a in NAMES]
    if names:
        ONLY = set(names)
        sys.argv = [sys.argv[0]] + [a for a in sys.argv[1:] if a not in names]
    TOOLS = llama_tools.LlamaTools(cache)
    if not TOOLS.available():
        if os.environ.get("GGUFS_REQUIRE_LLAMA"):
            print("the pinned node-llama-cpp package or g++ is missing", file=sys.stderr)
            return 1
        print("skipped: no node-llama-cpp package or g++")
        return 77
    prog = unittest.main(exit=False)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
