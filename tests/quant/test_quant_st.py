#!/usr/bin/env python3
"""quants/ of a mounted Hugging Face model folder (issue 47): every NAME that llama.cpp's
llama_model_quantize() (the pinned libllama, through ctypes) makes of the converter's
GGUF file is there, of its size, and Q8_0, Q4_K_M (every NAME for llama-spm-f32) are its
bytes, for each folder of tests/data/st (llama-spm-f32 against the converter's own file
beside it; mistral-spm and llama-spm-sharded against the mount's model.gguf, which
mount-st checks is the converter's byte for byte); a second mount with the same disk
cache reads them from it (the folder's identity: its parts and the converted header),
and a mount with another outtype does not.

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
    check_tree = qm.QuantMount.check_tree

    def test_each_folder(self):
        """quants/ of each folder against llama.cpp's of its converted file."""
        for folder, names in (("llama-spm-f32", [n for n, _ in qp.NAMES]),
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
