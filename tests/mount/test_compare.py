#!/usr/bin/env python3
"""compare/ in a library mount (issue 27): every model directory has compare/OTHER for
each other model of its folder, holding exactly what `ggufs --diff THIS OTHER` prints;
`ls compare/` opens no other model; each file's size is exact from its first lookup
(which computes the comparison: rsync and tar copy what stat promises); a model that
does not parse gives EIO to that lookup and to reads (one line in the log, counted in
eio_replies, kept as last_error); folders, plain files
and models of other folders are not there; the listing follows the folder. The folder
holds the bundled model and the same weights at other precisions, written here by
diff_pair: a real quantization's figures.

Run as `python3 test_compare.py GGUFS DIFF_PAIR`."""
import errno
import os
import shutil
import subprocess
import tempfile
import unittest

import ggufs_mount as gm


def opened(m):
    return int(os.getxattr(m.path, "user.ggufs.models_opened"))


class CompareTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ggufs-compare-")
        self.src = os.path.join(self.tmp, "models")
        os.makedirs(os.path.join(self.src, "sub"))
        shutil.copyfile(gm.TINY, self.path("q4.gguf"))
        gm.make_pair(self.path("f16.gguf"), "f16")
        gm.make_pair(self.path("f32v.gguf"), "f32", "--vary")
        with open(self.path("bad.gguf"), "wb") as f:
            f.write(b"GGUF\x03\x00\x00\x00 and then nothing")
        with open(self.path("README.md"), "wb") as f:
            f.write(b"# models\n")
        shutil.copyfile(gm.TINY, self.path("sub", "elsewhere.gguf"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def path(self, *parts):
        return os.path.join(self.src, *parts)

    def diff(self, a, b):
        r = gm.run_ggufs(["--diff", self.path(a), self.path(b)], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_compare(self):
        with gm.Mount(self.src) as m:
            self.assertIn("compare", os.listdir(m.p("q4")))
            self.assertEqual(opened(m), 1)   # q4, to look inside it
            # every other model of the folder, none of them opened to list
            names = sorted(os.listdir(m.p("q4", "compare")))
            self.assertEqual(names, ["bad", "f16", "f32v"])
            self.assertEqual(opened(m), 1)
            # the exact size from the first lookup on: the comparison is made then
            for n in ("f16", "f32v"):
                st = os.stat(m.p("q4", "compare", n))
                self.assertEqual(st.st_size, len(self.diff("q4.gguf", n + ".gguf")), n)
                self.assertEqual(st.st_mode & 0o777, 0o444)
            self.assertEqual(opened(m), 3)   # q4, f16, f32v
            eio = int(os.getxattr(m.path, "user.ggufs.eio_replies"))
            with self.assertRaises(OSError) as e:
                os.stat(m.p("q4", "compare", "bad"))
            self.assertEqual(e.exception.errno, errno.EIO)
            self.assertEqual(int(os.getxattr(m.path, "user.ggufs.eio_replies")), eio + 1)
            self.assertIn("q4/compare/bad: cannot compare: ",
                          os.getxattr(m.path, "user.ggufs.last_error").decode())
            # the numbers the man page gives: slot << 32 | 2^31 - 1 (+ 1 + OTHER's slot)
            slot = os.stat(m.p("q4")).st_ino >> 32
            low = 2 ** 31 - 1
            self.assertEqual(os.stat(m.p("q4", "compare")).st_ino, slot << 32 | low)
            self.assertEqual(os.stat(m.p("q4", "compare", "f16")).st_ino,
                             slot << 32 | (low + 1 + (os.stat(m.p("f16")).st_ino >> 32)))
            for absent in ("q4", "README", "README.md", "sub", "elsewhere", "models"):
                self.assertFalse(os.path.exists(m.p("q4", "compare", absent)), absent)
            # what rsync copies is the whole text, not an empty file
            out = os.path.join(self.tmp, "copied")
            r = subprocess.run(["cp", "-r", m.p("q4", "compare"), out],
                                  stderr=subprocess.PIPE)
            self.assertNotEqual(r.returncode, 0)   # bad: EIO, said
            self.assertEqual(gm.read_file(os.path.join(out, "f16")),
                             self.diff("q4.gguf", "f16.gguf"))
            # the text of ggufs --diff, whole and by slices, and again
            for this, other in (("q4", "f16"), ("q4", "f32v"), ("f16", "q4"), ("f32v", "f16")):
                with self.subTest(this=this, other=other):
                    want = self.diff(this + ".gguf", other + ".gguf")
                    p = m.p(this, "compare", other)
                    self.assertEqual(gm.read_file(p), want)
                    fd = os.open(p, os.O_RDONLY)
                    try:
                        for off in (0, 1, 100, len(want) - 7, len(want), len(want) + 10):
                            self.assertEqual(os.pread(fd, 333, off), want[off:off + 333], off)
                    finally:
                        os.close(fd)
                    self.assertEqual(gm.read_file(p), want)
            # a real quantization's figures: q4 against its own weights in f16
            lines = gm.read_file(m.p("q4", "compare", "f16")).decode().splitlines()
            model = dict(f.split("=", 1) for f in lines[-1].split("\t")[1:])
            self.assertLess(float(model["rel_rmse"]), 1e-3)
            self.assertGreater(float(model["rel_rmse"]), 0)
            # a model that does not parse: EIO, said in the log; it has no compare/
            with self.assertRaises(OSError) as e:
                gm.read_file(m.p("q4", "compare", "bad"))
            self.assertEqual(e.exception.errno, errno.EIO)
            self.assertEqual(os.listdir(m.p("bad")), ["error"])
            self.assertIn("q4/compare/bad: cannot compare: ", m.stderr())
            # a model of another folder compares with its own folder's only
            self.assertEqual(os.listdir(m.p("sub", "elsewhere", "compare")), [])
            # the listing follows the folder
            shutil.copyfile(self.path("f16.gguf"), self.path("late.gguf"))
            os.unlink(self.path("f32v.gguf"))
            self.assertEqual(sorted(os.listdir(m.p("q4", "compare"))), ["bad", "f16", "late"])
            self.assertEqual(gm.read_file(m.p("late", "compare", "q4")), self.diff("f16.gguf", "q4.gguf"))


if __name__ == "__main__":
    gm.main(diff_pair=True)
