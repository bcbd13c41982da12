#!/usr/bin/env python3
"""quants/ of a mount with -o recipes=FILE against llama-quantize itself (issue 46; the
pinned source's tool, built by llama_tools.py): each recipe's quants/NAME.gguf has the
sha256 of `llama-quantize OPTIONS [--imatrix F] MODEL OUT BASE` (a --tensor-type regex
as typed in the file, bartowski's Q4_K_L, an IQ base, --pure), without and with -o
imatrix; a recipe llama-quantize would refuse for the model (an IQ base without a
matrix) is absent, quants.tsv saying why under its NAME; a bad recipe file refuses the
mount in one line naming FILE and the line; in a library, every model has the
recipes.

    python3 tests/llama/test_mount_recipes.py GGUFS CACHE_DIR [unittest args]

Skipped (77) without the package, g++ or /dev/fuse, unless GGUFS_REQUIRE_LLAMA is set:
there it fails."""
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
import test_mount_imatrix as tmi  # noqa: E402  (sha256)
import test_quant_imatrix as tqi  # noqa: E402  (the model and matrices)

TOOLS = None
# NAME, BASE, llama-quantize's OPTIONS as its argv gets them, and as the file says them
RECIPES = [
    ("MIX_TT", "Q4_K_M", ["--tensor-type", "ffn_down=q5_k", "--tensor-type",
                          r"blk\.[0-1]\.attn_v=q8_0"],
     r'--tensor-type ffn_down=q5_k --tensor-type "blk\.[0-1]\.attn_v=q8_0"'),
    ("Q4_K_L", "Q4_K_M", ["--output-tensor-type", "q8_0", "--token-embedding-type", "q8_0"],
     "--output-tensor-type q8_0 --token-embedding-type q8_0"),
    ("IQ2_MIX", "IQ2_XXS", ["--tensor-type", "attn_v=q4_k", "--tensor-type", "ATTN_K=q4_k"],
     "--tensor-type attn_v=q4_k --tensor-type ATTN_K=q4_k"),
    ("pure-q3", "Q3_K_M", ["--pure", "--leave-output-tensor"], "--pure --leave-output-tensor"),
]


class MountRecipes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ggufs-mount-recipes-")
        os.chmod(cls.tmp, 0o755)
        d = cls.tmp
        cls.quantize = TOOLS.build("quantize")
        cls.many = TOOLS.build("quantize_many", extra=os.path.join(HERE, "quantize_many.cpp"),
                               with_dir="tools/quantize")
        cls.f16 = os.path.join(d, "tiny-F16.gguf")
        subprocess.run([cls.quantize, "--allow-requantize", tqi.MODEL, cls.f16, "F16", "2"],
                       env=TOOLS.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True, timeout=600)
        cls.imatrix = tqi.matrix(os.path.join(d, "tiny.imatrix"), cls.f16, 5)
        cls.recipes = os.path.join(d, "mixes.txt")
        with open(cls.recipes, "w") as f:
            f.write("# NAME   BASE    llama-quantize options\n\n")
            for name, base, _, text in RECIPES:
                f.write("%s\t%s  %s\n" % (name, base, text))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def references(self, imatrix):
        """llama-quantize OPTIONS [--imatrix imatrix] MODEL OUT BASE for each recipe, in
        one process: their sha256, or None where it refused."""
        status = os.path.join(self.tmp, "status")
        outs = [os.path.join(self.tmp, "ref-%d.gguf" % i) for i in range(len(RECIPES))]
        lines = "".join("\t".join(opts + (["--imatrix", imatrix] if imatrix else []) +
                                  [self.f16, out, base, "2"]) + "\n"
                        for (_, base, opts, _), out in zip(RECIPES, outs))
        subprocess.run([self.many, status], input=lines.encode(), env=TOOLS.env(),
                       cwd=self.tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=1500, check=True)
        with open(status) as f:
            codes = [int(x) for x in f.read().split()]
        self.assertEqual(len(codes), len(RECIPES))
        sums = []
        for rc, out in zip(codes, outs):
            sums.append(tmi.sha256(out) if rc == 0 else None)
            if os.path.exists(out):
                os.unlink(out)
        return sums

    def mounted(self, imatrix):
        """quants/'s listing, quants.tsv and each recipe's sha256 (None: not listed) of
        the model mounted with the recipes (and imatrix, unless None)."""
        opts = ["-o", "recipes=" + self.recipes, "-o", "cache_dir=none"]
        if imatrix:
            opts += ["-o", "imatrix=" + imatrix]
        with gm.Mount(self.f16, opts) as m:
            listed = set(os.listdir(m.p("quants")))
            with open(m.p("quants", "quants.tsv")) as f:
                tsv = f.read()
            sums = [tmi.sha256(m.p("quants", name + ".gguf"))
                    if name + ".gguf" in listed else None for name, _, _, _ in RECIPES]
            # a recipe is not its BASE's file
            for (name, base, _, _), got in zip(RECIPES, sums):
                if got:
                    self.assertNotEqual(got, tmi.sha256(m.p("quants", base + ".gguf")), name)
        return listed, tsv, sums

    def test_recipes_without_matrix(self):
        want = self.references(None)
        listed, tsv, got = self.mounted(None)
        self.assertIn("Q4_K_M.gguf", listed)   # the built-in NAMEs stay
        for (name, base, _, _), w, g in zip(RECIPES, want, got):
            with self.subTest(name=name):
                if base == "IQ2_XXS":   # llama-quantize refuses it without a matrix
                    self.assertIsNone(w)
                    self.assertIsNone(g)
                    self.assertIn("\n# %s: not made: this quantization requires an imatrix!"
                                  % name, tsv)
                else:
                    self.assertIsNotNone(w, "llama-quantize refused")
                    self.assertEqual(g, w)
                    self.assertIn("\n%s\t" % name, tsv)

    def test_recipes_with_matrix(self):
        # FILE relative, as llama-quantize is given it from the same folder
        want = self.references(os.path.basename(self.imatrix))
        old = os.getcwd()
        os.chdir(self.tmp)
        try:
            listed, tsv, got = self.mounted(os.path.basename(self.imatrix))
        finally:
            os.chdir(old)
        for (name, _, _, _), w, g in zip(RECIPES, want, got):
            with self.subTest(name=name):
                self.assertIsNotNone(w, "llama-quantize refused")
                self.assertEqual(g, w)
                self.assertIn("\n%s\t" % name, tsv)

    def test_library(self):
        # every model of a library has the recipes: a/m and b/m, the same model twice
        want = self.references(None)
        lib = os.path.join(self.tmp, "lib")
        for sub in ("a", "b"):
            os.makedirs(os.path.join(lib, sub), exist_ok=True)
            shutil.copyfile(self.f16, os.path.join(lib, sub, "m.gguf"))
        with gm.Mount(lib, ["-o", "recipes=" + self.recipes, "-o", "cache_dir=none"]) as m:
            for sub in ("a", "b"):
                listed = set(os.listdir(m.p(sub, "m", "quants")))
                for (name, _, _, _), w in zip(RECIPES, want):
                    with self.subTest(model=sub, name=name):
                        if w is None:
                            self.assertNotIn(name + ".gguf", listed)
                        else:
                            self.assertEqual(tmi.sha256(m.p(sub, "m", "quants",
                                                            name + ".gguf")), w)

    def test_bad_file_refuses(self):
        cases = [("A Q4_K_M\nB\n", ":2: "), ("# c\nA NOPE\n", ":2: "),
                 ("A Q4_K_M --tensor-type \"(=q4_k\"\n", ":1: "),
                 ("A Q4_K_M\nQ8_0 Q4_K_M\n", ":2: "),
                 ("A Q4_K_M --tensor-type x=nope\n", ":1: ")]
        for i, (text, where) in enumerate(cases):
            path = os.path.join(self.tmp, "bad-%d.txt" % i)
            with open(path, "w") as f:
                f.write(text)
            with self.subTest(text=text):
                err = gm.refused_mount(["-o", "recipes=" + path, self.f16])
                self.assertIn(path + where, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
        missing = os.path.join(self.tmp, "no-such.txt")
        self.assertIn(missing, gm.refused_mount(["-o", "recipes=" + missing, self.f16]))


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
