#!/usr/bin/env python3
"""llama.cpp itself loads a mounted Hugging Face model folder (issue 47), through
node-llama-cpp: model.gguf of tests/data/st/llama-spm-f32, mounted alone and as a model
directory of a library, gives the greedy tokens that loading the converter's own file
(llama-spm-f32.auto.gguf) gives, and its quants/Q4_K_M.gguf those of llama.cpp's own
Q4_K_M of that file (libllama through ctypes), each with mmap and with --no-mmap's
reads.

Without node, the installed package or /dev/fuse the test is skipped (77), except where
GGUFS_REQUIRE_LLAMA is set (CI sets it): there it fails."""
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "quant"))
sys.path.insert(0, os.path.join(HERE, "..", "mount"))
import ggufs_mount as gm  # noqa: E402
import test_quant_plan as qp  # noqa: E402
from test_llama import greedy, node_ready  # noqa: E402

ST = os.path.join(gm.DATA, "st")
FOLDER = os.path.join(ST, "llama-spm-f32")
REFERENCE = os.path.join(ST, "llama-spm-f32.auto.gguf")


class LlamaSt(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ggufs-llama-st-")
        ref_q4 = os.path.join(cls.dir, "ref-Q4_K_M.gguf")
        llama = qp.Llama(qp.find_libllama())
        assert llama.quantize(REFERENCE, ref_q4, qp.FTYPE["Q4_K_M"]) == 0
        base = greedy([REFERENCE, ref_q4], "--both")
        cls.tokens = {"model.gguf": base[0]["tokens"], "Q4_K_M.gguf": base[2]["tokens"]}
        assert len(cls.tokens["model.gguf"]) == 8 and base[1]["tokens"] == base[0]["tokens"]
        assert base[3]["tokens"] == base[2]["tokens"], base

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def check(self, model_dir):
        """model.gguf and quants/Q4_K_M.gguf of model_dir: the references' tokens."""
        paths = [os.path.join(model_dir, "model.gguf"),
                 os.path.join(model_dir, "quants", "Q4_K_M.gguf")]
        got = greedy(paths, "--both")
        self.assertEqual(len(got), 4)
        for g in got:
            self.assertEqual(g["tokens"], self.tokens[os.path.basename(g["path"])], g)

    def test_folder(self):
        with gm.Mount(FOLDER, ["-o", "cache_dir=none"]) as m:
            self.check(m.path)

    def test_in_a_library(self):
        lib = os.path.join(self.dir, "lib")
        shutil.copytree(FOLDER, os.path.join(lib, "llama-spm-f32"))
        with gm.Mount(lib, ["-o", "cache_dir=none"]) as m:
            self.check(m.p("llama-spm-f32"))


if __name__ == "__main__":
    gm.setup()
    why = node_ready() or (None if qp.find_libllama() else "libllama is not installed")
    if why:
        gm.main("llama", why)
    unittest.main(verbosity=2)
