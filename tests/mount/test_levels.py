#!/usr/bin/env python3
"""End to end: the same bytes at every dequantizer level. alltypes.gguf (one or two
tensors per ggml type, its bytes.* tensors full of NaN, inf and subnormal scales and
values) is mounted with GGUFS_DEQUANT=scalar, avx2 and avx512 in turn; every .f32 and
.npy file must hash the same at each level as on the portable code, NaN bit patterns
included (ggufs(1): a .f32 hashes the same everywhere). A level the CPU lacks falls
back to the best one it has, so on such a CPU that mount repeats another level's."""
import hashlib
import os
import unittest

import ggufs_mount as gm

MODEL = os.path.join(gm.VECTORS, "alltypes.gguf")
LEVELS = ("scalar", "avx2", "avx512")
FLOAT_SUFFIXES = (".f32", ".npy")


def float_file_hashes(root):
    """{path relative to root: sha256 hex} for every .f32 and .npy file under root."""
    hashes = {}
    for top, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(FLOAT_SUFFIXES):
                path = os.path.join(top, name)
                hashes[os.path.relpath(path, root)] = hashlib.sha256(gm.read_file(path)).hexdigest()
    return hashes


def hashes_at(level):
    """float_file_hashes of a mount whose daemon runs the dequantizers of level."""
    saved = os.environ.get("GGUFS_DEQUANT")
    os.environ["GGUFS_DEQUANT"] = level
    try:
        with gm.Mount(MODEL) as m:
            return float_file_hashes(m.path)
    finally:
        if saved is None:
            del os.environ["GGUFS_DEQUANT"]
        else:
            os.environ["GGUFS_DEQUANT"] = saved


class SameBytesAtEveryLevel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hashes = {level: hashes_at(level) for level in LEVELS}

    def test_every_float_file_is_there(self):
        """Both renderings of every tensor with a dequantizer (a test of this test:
        an empty walk would compare nothing)."""
        want = {"tensors/bytes.f16.f32", "tensors/bytes.q4_1.npy", "tensors/bytes.q1_0.f32"}
        self.assertTrue(want <= set(self.hashes["scalar"]), sorted(self.hashes["scalar"]))
        self.assertGreaterEqual(len(self.hashes["scalar"]), 2 * 50)

    def test_same_hashes(self):
        scalar = self.hashes["scalar"]
        for level in LEVELS[1:]:
            with self.subTest(level=level):
                got = self.hashes[level]
                self.assertEqual(sorted(got), sorted(scalar))
                differ = sorted(path for path in scalar if got[path] != scalar[path])
                self.assertEqual(differ, [], "%s differs from scalar" % level)


if __name__ == "__main__":
    gm.main()
