#!/usr/bin/env python3
"""quants/ of a remote model when the server fails (issue 36, "Faults"): a quant block
whose source bytes cannot be fetched gives EIO within the bound every remote read has
(-o timeout=2: EIO_TIMEOUT), the daemon lives on, and once the server mends the same
read gives llama.cpp's bytes; a model that changes on the server (same size, other
bytes) gives EIO for the blocks not yet made, never a block quantized from the new
bytes. The source is the bundled model rewritten as F16 by llama.cpp, served by the
tests' fault server; the reference is llama_model_quantize() of that file (the pinned
libllama through ctypes).

Usage: test_quant_faults.py GGUFS_BINARY. Skipped (77) without /dev/fuse or without the
installed node-llama-cpp package (unless GGUFS_REQUIRE_LLAMA is set)."""
import errno
import os
import shutil
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
import test_quant_plan as qp  # noqa: E402
from remote_common import (EIO_TIMEOUT, FAILED_HOLD, EnvMount, FaultServer, gm,  # noqa: E402
                           read_bounded, tensor_extents)

PATH = "/models/tiny-F16.gguf"
NAME = "Q8_0"
PIECE = 4096


class QuantFaults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ggufs-quant-faults-")
        llama = qp.Llama(qp.find_libllama())
        f16 = qp.tiny(llama, cls.dir)
        ref = os.path.join(cls.dir, "ref.gguf")
        assert llama.quantize(f16, ref, qp.FTYPE[NAME], False) == 0
        cls.data = gm.read_file(f16)
        cls.ref = gm.read_file(ref)
        # the quant's first tensor and its last piece: their source bytes lie megabytes
        # apart in the model, so no fetch of the one holds the other
        extents = sorted(tensor_extents(ref).values())
        cls.early = extents[0][0]
        cls.late = len(cls.ref) - PIECE
        src = sorted(tensor_extents(f16).values())
        assert src[-1][0] - src[0][1] > (1 << 20)
        cls.data_start = src[0][0]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def read(self, m, offset):
        """(errno, bytes, seconds) of a PIECE of the mount's quant at offset, O_DIRECT."""
        return read_bounded(m.p("quants", NAME + ".gguf"), offset, PIECE, EIO_TIMEOUT)

    def assert_served(self, m, offset):
        err, got, _ = self.read(m, offset)
        self.assertEqual(err, 0, "reading at %d: %s" % (offset, errno.errorcode.get(err)))
        self.assertEqual(got, self.ref[offset:offset + PIECE], "llama.cpp's bytes at %d" % offset)

    def mount(self, s):
        return EnvMount(s.url + PATH, ["-o", "timeout=2,cache_dir=none"])

    def test_503_then_mended(self):
        """A server that answers 503 to everything: EIO in the bound, the daemon lives,
        the same read right once the server mends."""
        with FaultServer({PATH: self.data}) as s, self.mount(s) as m:
            self.assertEqual(os.path.getsize(m.p("quants", NAME + ".gguf")), len(self.ref))
            self.assert_served(m, self.early)
            s.fail_next(1000000, 503)
            err, got, elapsed = self.read(m, self.late)
            self.assertEqual(err, errno.EIO, "got %d bytes" % len(got))
            self.assertLess(elapsed, EIO_TIMEOUT)
            self.assertIsNone(m.proc.poll(), "the daemon is alive")
            s.clear_failures()
            time.sleep(FAILED_HOLD)   # a block that just failed fails at once for 2 s
            self.assert_served(m, self.late)
            self.assert_served(m, self.early)
            print("EIO after %.1f s, then llama.cpp's bytes" % elapsed)

    def test_changed_on_the_server(self):
        """The model rewritten on the server (every tensor byte inverted, same size):
        a block not yet made gives EIO, never one quantized from the new bytes; the
        block made before keeps its bytes."""
        start = self.data_start
        changed = self.data[:start] + bytes(b ^ 0xFF for b in self.data[start:])
        with FaultServer({PATH: self.data}) as s, self.mount(s) as m:
            self.assert_served(m, self.early)
            s.swap(PATH, changed)
            err, got, _ = self.read(m, self.late)
            self.assertEqual(err, errno.EIO, "a read of the changed model gave %d bytes" % len(got))
            err, got, _ = self.read(m, self.early)
            self.assertIn(err, (0, errno.EIO))
            if err == 0:
                self.assertEqual(got, self.ref[self.early:self.early + PIECE])
            self.assertIsNone(m.proc.poll(), "the daemon is alive")


if __name__ == "__main__":
    qp.mount_test_main()
