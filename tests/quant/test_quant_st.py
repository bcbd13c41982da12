#!/usr/bin/env python3
"""quants/ of a mounted Hugging Face model folder (issue 47): every NAME that llama.cpp's
llama_model_quantize() (the pinned libllama, through ctypes) makes of the converter's
GGUF file is there, every NAME listed is one it makes for that ftype, of its size, and
Q8_0, Q4_K_M (every NAME listed, for llama-spm-f32) are its bytes, for each folder of
tests/data/st (llama-spm-f32 against the converter's own file beside it; mistral-spm
and llama-spm-sharded against the mount's model.gguf, which mount-st checks is the
converter's byte for byte); a second mount with the same disk cache reads them from it
(the folder's identity: its parts and the converted header), and a mount with another
outtype does not.

Usage: test_quant_st.py GGUFS_BINARY. Skipped (77) without /dev/fuse or without the
installed node-llama-cpp package (unless GGUFS_REQUIRE_LLAMA is set)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mount"))
import ggufs_mount as gm  # noqa: E402
import test_quant_mount as qm  # noqa: E402
import test_quant_plan as qp  # noqa: E402

ST = os.path.join(gm.DATA, "st")
REFERENCE = os.path.join(ST, "llama-spm-f32.auto.gguf")


class StQuants(qp.QuantCase):
    PREFIX = "ggufs-quant-st-"
    reference = qm.QuantMount.reference

    def check_tree(self, quants, src, names):
        """quants/ of a mount of src: every NAME quants.tsv lists is the file llama.cpp
        makes of src for its ftype (its size; its bytes for names, None: all), and
        every NAME of qp.NAMES that llama.cpp makes, of a type ggufs makes, is listed."""
        with open(os.path.join(quants, "quants.tsv")) as f:
            text = f.read()
        later = {line.split(":")[0][2:] for line in text.splitlines()
                 if line.startswith("# ") and "does not quantize to" in line}
        rows = [line.split("\t") for line in text.splitlines() if not line.startswith("#")]
        self.assertEqual(rows[0], ["name", "ftype", "bytes", "bits_per_weight", "tensor_types"])
        listed = {r[0]: (int(r[1]), int(r[2])) for r in rows[1:]}
        self.assertEqual(sorted(os.listdir(quants)),
                         sorted([n + ".gguf" for n in listed] + ["quants.tsv"]))
        out = os.path.join(self.dir, "ref.gguf")
        for name, (ftype, size) in sorted(listed.items()):
            if os.path.exists(out):
                os.unlink(out)
            self.assertEqual(self.llama.quantize(src, out, ftype), 0, name)
            self.assertEqual(os.path.getsize(out), size, name)
            self.assertEqual(os.stat(os.path.join(quants, name + ".gguf")).st_size, size, name)
            if names is None or name in names:
                self.assertEqual(qp.sha256_file(os.path.join(quants, name + ".gguf")),
                                 qp.sha256_file(out), name)
        for name, _ in qp.NAMES:
            if name not in later and name not in listed:
                self.assertIsNone(self.reference(src, name), name)

    def test_each_folder(self):
        """quants/ of each folder against llama.cpp's of its converted file."""
        for folder, names in (("llama-spm-f32", None),
                              ("mistral-spm", ("Q8_0", "Q4_K_M")),
                              ("llama-spm-sharded", ("Q8_0", "Q4_K_M"))):
            with self.subTest(folder=folder), \
                    gm.Mount(os.path.join(ST, folder), ["-o", "cache_dir=none"]) as m:
                src = REFERENCE if folder == "llama-spm-f32" else m.p("model.gguf")
                self.check_tree(m.p("quants"), src, names)

    def test_disk_cache(self):
        """A second mount of the folder reads Q4_K_M from the disk cache the first filled;
        a mount as f32 makes its own."""
        cache = os.path.join(self.dir, "cache")
        os.mkdir(cache, 0o700)
        want = gm.read_file(self.reference(REFERENCE, "Q4_K_M"))
        folder = os.path.join(ST, "llama-spm-f32")
        counts = []
        for opts in ([], [], ["-o", "outtype=f32"]):
            with gm.Mount(folder, ["-o", "cache_dir=" + cache] + opts) as m:
                path = m.p("quants", "Q4_K_M.gguf")
                got = gm.read_file(path)
                if not opts:
                    self.assertEqual(got, want)
                counts.append({k: int(os.getxattr(path, "user.ggufs." + k))
                               for k in ("blocks_computed", "blocks_from_disk")})
        self.assertGreater(counts[0]["blocks_computed"], 0)
        self.assertEqual(counts[1]["blocks_computed"], 0, counts)
        self.assertGreater(counts[1]["blocks_from_disk"], 0, counts)
        self.assertGreater(counts[2]["blocks_computed"], 0, counts)
        self.assertEqual(counts[2]["blocks_from_disk"], 0, counts)


if __name__ == "__main__":
    qp.mount_test_main()
