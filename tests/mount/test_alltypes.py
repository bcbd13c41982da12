#!/usr/bin/env python3
"""End to end: every ggml type through the mount. alltypes.gguf holds one or two
tensors per type; each .f32 must match ggml's own dequantized output
(vectors/expected/NAME.f32) within 1e-6 of the tensor's largest finite |value|, NaN
for NaN and infinities exactly, read whole and in unaligned pieces."""
import csv
import os
import random
import unittest

import numpy

import ggufs_mount as gm

MODEL = os.path.join(gm.VECTORS, "alltypes.gguf")
EXPECTED_DIR = os.path.join(gm.VECTORS, "expected")
REL_TOL = 1e-6
PREADS_PER_TENSOR = 50

with open(os.path.join(gm.VECTORS, "manifest.tsv"), newline="") as f:
    MANIFEST = list(csv.DictReader(f, delimiter="\t"))


def close_enough(got, want):
    """None when the float32 arrays agree under ggufs(1)'s rule, else a message."""
    if got.shape != want.shape:
        return "shape %s, want %s" % (got.shape, want.shape)
    gn, wn = numpy.isnan(got), numpy.isnan(want)
    if not numpy.array_equal(gn, wn):
        i = int(numpy.argmax(gn != wn))
        return "element %d is %r, want %r (NaN)" % (i, got[i], want[i])
    wi = numpy.isinf(want)
    if not numpy.array_equal(got[wi], want[wi]) or numpy.isinf(got[~wi]).any():
        i = int(numpy.argmax((numpy.isinf(got) != wi) | (wi & (got != want))))
        return "element %d is %r, want %r (inf)" % (i, got[i], want[i])
    finite = ~wn & ~wi
    if not finite.any():
        return None
    scale = float(numpy.abs(want[finite].astype(numpy.float64)).max())
    diff = numpy.abs(got[finite].astype(numpy.float64) - want[finite].astype(numpy.float64))
    if (diff > REL_TOL * scale).any():
        i = int(numpy.flatnonzero(finite)[int(numpy.argmax(diff))])
        return "element %d is %r, want %r (scale %g)" % (i, got[i], want[i], scale)
    return None


class AllTypes(gm.MountedTestCase):
    MODEL = MODEL

    def files(self, row):
        name = gm.escape_name(row["tensor"].encode(), tensor=True)
        return self.p("tensors", name), self.p("tensors", name + ".f32")

    def test_manifest_is_complete(self):
        self.assertGreaterEqual(len(MANIFEST), 40)

    def test_quiet(self):
        """Every type is known: no raw-only warning at mount."""
        self.assertEqual(self.mount.stderr(), "")

    def test_type_xattr(self):
        for row in MANIFEST:
            raw, f32 = self.files(row)
            for path in (raw, f32, f32[:-4] + ".npy"):
                self.assertEqual(os.getxattr(path, "user.gguf.type").decode(), row["type"])
                self.assertEqual(os.getxattr(path, "user.gguf.dims").decode(),
                                 "%s,%s" % (row["ne0"], row["ne1"]))

    def test_npy(self):
        for row in MANIFEST:
            with self.subTest(tensor=row["tensor"]):
                _, f32 = self.files(row)
                a = numpy.load(f32[:-4] + ".npy")
                self.assertEqual(a.shape, (int(row["ne1"]), int(row["ne0"])))
                self.assertEqual(a.tobytes(), gm.read_file(f32))

    def test_raw(self):
        for row in MANIFEST:
            with self.subTest(tensor=row["tensor"], type=row["type"]):
                raw, _ = self.files(row)
                want = gm.read_file(os.path.join(EXPECTED_DIR, row["tensor"] + ".raw"))
                self.assertEqual(os.stat(raw).st_size, len(want))
                self.assertEqual(gm.read_file(raw), want)

    def test_f32_whole(self):
        for row in MANIFEST:
            with self.subTest(tensor=row["tensor"], type=row["type"]):
                _, f32 = self.files(row)
                want = numpy.fromfile(os.path.join(EXPECTED_DIR, row["tensor"] + ".f32"),
                                      dtype=numpy.float32)
                ne0, ne1 = int(row["ne0"]), int(row["ne1"])
                self.assertEqual(os.stat(f32).st_size, 4 * ne0 * ne1)
                got = numpy.fromfile(f32, dtype=numpy.float32).reshape(ne1, ne0)
                self.assertIsNone(close_enough(got.ravel(), want))

    def test_f32_unaligned_preads(self):
        """Ranges that start and end inside blocks (an offset that is not a multiple of
        4 is inside a block of any type) give the bytes of the whole read, and their
        whole floats match ggml's."""
        rng = random.Random(3)
        for row in MANIFEST:
            with self.subTest(tensor=row["tensor"], type=row["type"]):
                _, f32 = self.files(row)
                whole = gm.read_file(f32)
                want = numpy.fromfile(os.path.join(EXPECTED_DIR, row["tensor"] + ".f32"),
                                      dtype=numpy.float32)
                size = len(whole)
                self.assertEqual(size, 4 * want.size)
                for _ in range(PREADS_PER_TENSOR):
                    while True:
                        off = rng.randrange(1, size - 1)
                        end = min(size - 1, off + rng.choice([2, 5, 37, 1029, 4097, 3 * 4096 + 7]))
                        if off % 4 and end % 4 and end > off:
                            break
                    got = gm.pread_direct(f32, end - off, off)
                    self.assertEqual(got, whole[off:end], (off, end))
                    first = (off + 3) // 4
                    last = end // 4
                    if last > first:
                        vals = numpy.frombuffer(got[4 * first - off:4 * last - off],
                                                dtype=numpy.float32)
                        msg = close_enough(vals, want[first:last])
                        self.assertIsNone(msg, (off, end, msg))


if __name__ == "__main__":
    gm.main()
