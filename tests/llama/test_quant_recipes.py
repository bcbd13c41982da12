#!/usr/bin/env python3
"""Recipes (issue 46, -o recipes=FILE: recipe_file.h) against llama-quantize itself: for
each recipe `NAME BASE OPTIONS` of a file written here, the file ggufs plans and
quantizes (quant_plan_dump MODEL NAME OUT recipes=FILE [imatrix=FILE]) and the file
`llama-quantize OPTIONS [--imatrix FILE] MODEL OUT BASE` writes (the pinned source's
tool, built by llama_tools.py) are made or refused alike, and when made are equal byte
for byte.

The recipes are chosen for llama.cpp's traps: --tensor-type on an F16 or BF16 base
(ignored) beside --output-tensor-type (not ignored); overrides of attn_v and ffn_down,
which then do not move the layer counters the mixture's rules use for the layers after
them; the output and token embedding types (tied embeddings too); --pure alone and with
overrides; --leave-output-tensor; the first matching pattern winning; patterns with
anchors, classes, alternations and a backslash in double quotes; patterns lowercased
by the tool (ATTN_Q, \\D becoming \\d); rows of 896 values, where an override's type
falls back; an override to a type that needs an importance matrix (refused without one).

    python3 tests/llama/test_quant_recipes.py BUILD/tests/quant_plan_dump CACHE_DIR

Skipped (77) without the package or g++, unless GGUFS_REQUIRE_LLAMA is set: there it
fails."""
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "quant"))
import llama_tools  # noqa: E402
import test_quant_plan as qp  # noqa: E402  (random_llama)
import test_quant_imatrix as qi  # noqa: E402  (matrix)

DATA = os.environ.get("GGUFS_TEST_DATA", os.path.join(HERE, "..", "data"))
MODEL = os.path.join(DATA, "tinyllama-q4km.gguf")

# NAME BASE OPTIONS, as a recipe file holds them (shell words)
RECIPES = r'''
# the issue's two
Q4_K_L   Q4_K_M  --output-tensor-type q8_0 --token-embedding-type q8_0
MIX3     IQ3_M   --tensor-type ffn_down=q4_k --tensor-type "blk\.[0-3]\.attn_v=q8_0"
# an F16 or BF16 base ignores --tensor-type, not --output-tensor-type
F16T     F16     --tensor-type attn=q4_0 --tensor-type ffn=q8_0
BF16O    bf16    --output-tensor-type q8_0 --tensor-type "blk\.0\..*=q4_k"
# overridden attn_v / ffn_down do not advance the counters of the layers after them
VDOWN    Q4_K_M  --tensor-type "blk\.0\.attn_v=q4_k" --tensor-type "blk\.[01]\.ffn_down=q5_k"
Q3MV     Q3_K_M  --tensor-type "^blk\.[02468]\.attn_v\.weight$=q8_0"
Q5KMD    Q5_K_M  --tensor-type "blk\.(1|3|5)\.ffn_down\.weight$=q4_0"
# --pure, alone and under overrides; --leave-output-tensor
PURE     Q4_K_M  --pure
PUREMIX  Q5_K_M  --pure --tensor-type "ffn_(up|gate)=q8_0"
LEAVE    Q4_K_S  --leave-output-tensor
LEAVE3   Q3_K_L  --leave-output-tensor --token-embedding-type q4_0
# the first pattern that matches wins; patterns lowercased as the tool does
FIRST    Q4_K_M  --tensor-type attn=q5_0 --tensor-type attn_v=q8_0
CASE     Q4_K_M  --tensor-type "ATTN_Q\.WEIGHT=Q8_0" --tensor-type "blk\.\D\.attn_k=q5_1"
CLASS    Q2_K    --tensor-type "[fo][fu][nt]_?(down|put)=iq4_nl" --token-embedding-type q4_k
OUTONLY  IQ4_XS  --output-tensor-type q5_k
Q6OUT    q6_k    --output-tensor-type Q4_K
# an override to a type that needs an importance matrix: refused without one
NEEDMX   Q4_K_M  --tensor-type "blk\.0\.ffn_up=iq2_xxs"
'''
WORDS = {line.split()[0]: shlex.split(line)[1:] for line in RECIPES.splitlines()
         if line.strip() and not line.startswith("#")}
DUMP = None
TOOLS = None


class QuantRecipes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ggufs-quant-recipes-")
        d = cls.tmp.name
        cls.many = TOOLS.build("quantize_many", extra=os.path.join(HERE, "quantize_many.cpp"),
                               with_dir="tools/quantize")
        cls.quantize = TOOLS.build("quantize")
        cls.recipes = os.path.join(d, "mixes.txt")
        with open(cls.recipes, "w") as f:
            f.write(RECIPES)
        cls.f16 = os.path.join(d, "tiny-F16.gguf")
        subprocess.run([cls.quantize, "--allow-requantize", MODEL, cls.f16, "F16", "2"],
                       env=TOOLS.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=600, check=True)
        # 8 layers: the counters' use_more_bits and n/8 tell layers apart
        cls.deep = os.path.join(d, "rand-8.gguf")
        qp.random_llama(cls.deep, seed=21, n_embd=256, n_ff=256, n_layer=8, n_head=4,
                        n_head_kv=4, n_vocab=64, gtype=qp.F16)
        cls.tied = os.path.join(d, "rand-tied.gguf")
        qp.random_llama(cls.tied, seed=22, n_embd=256, n_ff=128, n_layer=2, n_head=4,
                        n_head_kv=1, n_vocab=64, gtype=qp.F16, tied=True)
        cls.wide = os.path.join(d, "rand-896.gguf")
        qp.random_llama(cls.wide, seed=23, n_embd=896, n_ff=128, n_layer=2, n_head=7,
                        n_head_kv=1, n_vocab=64, gtype=qp.F16)
        cls.made = 0

    @classmethod
    def tearDownClass(cls):
        print("\nrecipe files byte for byte llama-quantize's: %d" % cls.made, file=sys.stderr)
        cls.tmp.cleanup()

    def references(self, jobs):
        """llama-quantize's exit status for each (args, out) of jobs, in one process."""
        status = os.path.join(self.tmp.name, "status")
        lines = "".join("\t".join(args) + "\n" for args in jobs)
        subprocess.run([self.many, status], input=lines.encode(), env=TOOLS.env(),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1200,
                       check=True)
        with open(status) as f:
            return [int(x) for x in f.read().split()]

    def check(self, model, names, imatrix=None, expect_made=None):
        """Each recipe of names on model (under imatrix): made or refused alike, equal
        when made; expect_made: {name: whether llama-quantize makes it}."""
        jobs, refs = [], []
        for name in names:
            ref = os.path.join(self.tmp.name, "ref-%s.gguf" % name)
            opts = WORDS[name][1:] + (["--imatrix", imatrix] if imatrix else [])
            jobs.append(opts + [model, ref, WORDS[name][0], "2"])
            refs.append(ref)
        status = self.references(jobs)
        self.assertEqual(len(status), len(names))
        for name, ref, rc in zip(names, refs, status):
            with self.subTest(model=os.path.basename(model), name=name, imatrix=bool(imatrix)):
                ours = os.path.join(self.tmp.name, "ours.gguf")
                args = [DUMP, model, name, ours, "recipes=" + self.recipes]
                if imatrix:
                    args.append("imatrix=" + imatrix)
                o = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   timeout=600)
                if expect_made and name in expect_made:
                    self.assertEqual(rc == 0, expect_made[name],
                                     "llama-quantize's exit status %d" % rc)
                if rc != 0:
                    self.assertEqual(o.returncode, 3, "ggufs made a file llama-quantize refuses")
                    continue
                self.assertEqual(o.returncode, 0, o.stderr.decode(errors="replace"))
                # every tensor made, none left as zeros
                self.assertNotIn(" 3\n", o.stdout.decode())
                with open(ref, "rb") as a, open(ours, "rb") as b:
                    want, got = a.read(), b.read()
                os.unlink(ref)
                self.assertEqual(len(want), len(got))
                if want != got:
                    first = next(i for i in range(len(want)) if want[i] != got[i])
                    self.fail("first differing byte at %d of %d" % (first, len(want)))
                type(self).made += 1

    def test_tiny(self):
        self.check(self.f16, list(WORDS), expect_made={"NEEDMX": False, "Q4_K_L": True,
                                                      "VDOWN": True, "F16T": True})

    def test_deep(self):
        self.check(self.deep, ["VDOWN", "Q3MV", "Q5KMD", "MIX3", "CASE", "FIRST", "PUREMIX",
                               "F16T"])

    def test_tied(self):
        self.check(self.tied, ["Q4_K_L", "OUTONLY", "LEAVE3", "Q6OUT", "BF16O"])

    def test_wide_rows(self):
        self.check(self.wide, ["MIX3", "VDOWN", "CLASS", "Q4_K_L"])

    def test_imatrix(self):
        mx = qi.matrix(os.path.join(self.tmp.name, "deep.imatrix"), self.deep, 7)
        self.check(self.deep, ["NEEDMX", "MIX3", "VDOWN", "CLASS", "Q4_K_L", "PURE"],
                   imatrix=mx, expect_made={"NEEDMX": True})


def main():
    global DUMP, TOOLS
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    DUMP, cache = sys.argv.pop(1), sys.argv.pop(1)
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
