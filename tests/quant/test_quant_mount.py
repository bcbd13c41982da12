#!/usr/bin/env python3
"""quants/ in a mounted tree (issue 36): every NAME.gguf is byte for byte the file that
llama.cpp's llama_model_quantize() (the pinned libllama, through ctypes) writes from
the mount's own model.gguf, its size exact at lookup; quants.tsv lists the same sizes;
NAMEs llama.cpp refuses are not there (none of a model of an unknown architecture,
quants.tsv saying why). On a single mount of float models (random
llamas with rows that are not multiples of 256, grouped query attention, a mixture of
experts, the bundled model rewritten as F16), a model directory inside a library, and a
mount with edits, where an edited key makes every quant file a new inode holding the
edited header.

Usage: test_quant_mount.py GGUFS_BINARY. Skipped (77) without /dev/fuse or without the
installed node-llama-cpp package (unless GGUFS_REQUIRE_LLAMA is set)."""
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mount"))
import ggufs_mount as gm  # noqa: E402
import test_quant_plan as qp  # noqa: E402

# the NAMEs read whole on every model; the others on the first model only (time)
EVERY = ("F16", "Q8_0", "Q6_K", "Q4_K_M", "Q4_0", "IQ4_XS", "Q2_K", "MXFP4_MOE", "Q3_K_M",
         "Q5_K_S")
# The NAMEs llama-quantize makes only with an importance matrix, unless no tensor of the
# model is given a type that needs one (rows it falls back for): made then without one.
NEED_MATRIX = [("IQ2_XXS", 19), ("IQ2_XS", 20), ("IQ2_S", 28), ("IQ2_M", 29), ("IQ1_S", 24),
               ("IQ1_M", 31), ("Q2_K_S", 21), ("IQ3_XS", 22), ("IQ3_XXS", 23)]   # quants.tsv's order
FTYPE = dict(qp.NAMES + NEED_MATRIX)


class QuantMount(qp.QuantCase):
    PREFIX = "ggufs-quant-mount-"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.models = {"tiny-F16": qp.tiny(cls.llama, cls.dir)}
        for name, kw in (
                ("rand-gqa", dict(seed=11, n_embd=96, n_ff=160, n_layer=4, n_head=8,
                                  n_head_kv=2, n_vocab=300, gtype=qp.F16, shuffle=True,
                                  extra=[("blk.3.odd.weight", [40, 8])])),
                ("rand-moe", dict(seed=12, n_embd=256, n_ff=64, n_layer=2, n_head=4,
                                  n_head_kv=1, n_vocab=128, gtype=qp.BF16, n_expert=8))):
            path = os.path.join(cls.dir, name + ".gguf")
            qp.random_llama(path, **kw)
            cls.models[name] = path

    def reference(self, src, name):
        """llama.cpp's file of src for NAME (its path), or None when it makes none."""
        out = os.path.join(self.dir, "ref-%s.gguf" % name)
        if os.path.exists(out):
            os.unlink(out)
        return out if self.llama.quantize(src, out, FTYPE[name]) == 0 else None

    def check_tree(self, quants, src, names):
        """quants/ of a mount of src: the NAMEs llama.cpp makes, each of its size and,
        for names, its bytes; quants.tsv's sizes. A NAME of a type lib/2-quant does not
        make yet (quants.tsv says which) is left out, only those of the types to come."""
        listed = sorted(os.listdir(quants))
        with open(os.path.join(quants, "quants.tsv")) as f:
            text = f.read()
        later = {line.split(":")[0][2:] for line in text.splitlines()
                 if line.startswith("# ") and "does not quantize to" in line}
        self.assertLessEqual(later, {"IQ4_XS", "IQ4_NL", "IQ3_M", "IQ3_S", "TQ2_0", "TQ1_0",
                                     "MXFP4_MOE", "Q2_0", "Q1_0"})
        made = {}
        for name, _ in qp.NAMES + NEED_MATRIX:
            ref = self.reference(src, name)
            if ref and name not in later:
                made[name] = os.path.getsize(ref)
                self.assertEqual(os.stat(os.path.join(quants, name + ".gguf")).st_size,
                                 made[name], name)
                if name in names:
                    self.assertEqual(qp.sha256_file(os.path.join(quants, name + ".gguf")),
                                     qp.sha256_file(ref), name)
        self.assertEqual(listed, sorted([n + ".gguf" for n in made] + ["quants.tsv"]))
        rows = [line.split("\t") for line in text.splitlines() if not line.startswith("#")]
        self.assertEqual(rows[0], ["name", "ftype", "bytes", "bits_per_weight", "tensor_types"])
        self.assertEqual({r[0]: int(r[2]) for r in rows[1:]}, made)
        for r in rows[1:]:
            self.assertEqual(int(r[1]), FTYPE[r[0]])

    def test_single(self):
        """Every NAME of each model, read whole through a mount."""
        for i, (model, path) in enumerate(sorted(self.models.items())):
            with self.subTest(model=model), gm.Mount(path) as m:
                names = [n for n, _ in qp.NAMES] if i == 0 else EVERY
                self.check_tree(m.p("quants"), m.p("model.gguf"), names)

    def test_middle_read(self):
        """A read in the middle of a quant file is the reference's bytes there."""
        src = self.models["tiny-F16"]
        ref = self.reference(src, "Q4_K_M")
        with open(ref, "rb") as f:
            want = f.read()
        with gm.Mount(src) as m:
            with open(m.p("quants", "Q4_K_M.gguf"), "rb") as f:
                for off in (len(want) // 2 + 12345, len(want) - 100, 1000, 0):
                    f.seek(off)
                    self.assertEqual(f.read(4096), want[off:off + 4096], off)

    def test_library(self):
        """quants/ inside a library's model directory."""
        lib = tempfile.mkdtemp(prefix="ggufs-quant-lib-")
        try:
            os.makedirs(os.path.join(lib, "a"))
            shutil.copyfile(self.models["rand-gqa"], os.path.join(lib, "a", "m.gguf"))
            with gm.Mount(lib) as m:
                quants = m.p("a", "m", "quants")
                self.check_tree(quants, m.p("a", "m", "model.gguf"), EVERY)
        finally:
            shutil.rmtree(lib)

    def test_unknown_arch(self):
        """A model of an architecture llama.cpp does not know: quants/ holds no NAME,
        as llama.cpp makes none, and quants.tsv gives llama.cpp's reason for each."""
        path = os.path.join(self.dir, "nosucharch.gguf")
        qp.random_llama(path, seed=13, n_embd=64, n_ff=128, n_layer=2, n_head=4, n_head_kv=2,
                        n_vocab=64, gtype=qp.F16, arch="nosucharch")
        with gm.Mount(path) as m:
            self.check_tree(m.p("quants"), m.p("model.gguf"), ())
            self.assertEqual(os.listdir(m.p("quants")), ["quants.tsv"])
            with open(m.p("quants", "quants.tsv")) as f:
                lines = f.read().splitlines()
            self.assertEqual(lines[1:], ["# %s: not made: unknown model architecture: "
                                         "'nosucharch'" % n for n, _ in qp.NAMES + NEED_MATRIX])

    def test_edits(self):
        """An edited key: new inodes in quants/, each the quantization of the edited
        model.gguf."""
        edits = os.path.join(self.dir, "edits.json")
        with gm.Mount(self.models["rand-gqa"], ["-o", "edits=" + edits]) as m:
            before = os.stat(m.p("quants", "Q8_0.gguf"))
            gm.put(m.p("metadata", "general.name"), b"an edited name, longer than before\n")
            after = os.stat(m.p("quants", "Q8_0.gguf"))
            self.assertNotEqual(before.st_ino, after.st_ino)
            self.assertNotEqual(before.st_size, after.st_size)
            self.check_tree(m.p("quants"), m.p("model.gguf"), ("Q8_0", "Q4_K_M"))


if __name__ == "__main__":
    qp.mount_test_main()
