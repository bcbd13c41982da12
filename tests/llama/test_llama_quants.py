#!/usr/bin/env python3
"""llama.cpp itself loads quants/Q4_K_M.gguf (issue 36), through node-llama-cpp: of a
local mount, a remote model (nginx by URL) and a model directory of a library, each
with mmap and with --no-mmap's reads. The source is the bundled model rewritten as F16
by llama.cpp (libllama through ctypes), and every load's greedy completion is exactly
the tokens that loading llama.cpp's own Q4_K_M of that file gives.

Without node, the installed package or /dev/fuse the test is skipped (77), except where
GGUFS_REQUIRE_LLAMA is set (CI sets it): there it fails."""
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "quant"))
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
import test_quant_plan as qp  # noqa: E402
from remote_common import EnvMount, gm, install, public_root  # noqa: E402
from test_llama import LlamaCase, node_ready  # noqa: E402


class LlamaQuants(LlamaCase):
    @classmethod
    def setUpClass(cls):
        llama = qp.Llama(qp.find_libllama())
        cls.root = public_root()
        cls.dir = tempfile.mkdtemp(prefix="ggufs-llama-quants-")
        cls.f16 = install(qp.tiny(llama, cls.dir), cls.root, "models/tiny-F16.gguf")
        ref = os.path.join(cls.dir, "tiny-Q4_K_M.gguf")
        assert llama.quantize(cls.f16, ref, qp.FTYPE["Q4_K_M"]) == 0
        cls.start(ref)   # llama.cpp's Q4_K_M's tokens

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_local(self):
        with gm.Mount(self.f16) as m:
            self.check_loads([m.p("quants", "Q4_K_M.gguf")])

    def test_remote(self):
        with EnvMount(self.nginx.url + "/models/tiny-F16.gguf") as m:
            self.check_loads([m.p("quants", "Q4_K_M.gguf")])

    def test_library(self):
        with gm.Mount(self.root) as lib:
            self.check_loads([lib.p("models", "tiny-F16", "quants", "Q4_K_M.gguf")])


def main():
    why = node_ready()
    if not why and not qp.find_libllama():
        why = "libllama of node-llama-cpp is not installed (npm ci in tests/llama)"
    gm.main("llama", why)


if __name__ == "__main__":
    main()
