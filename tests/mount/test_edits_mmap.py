#!/usr/bin/env python3
"""Mappings of the files an edit changes, with -o edits=FILE (issue 24 item 17): they
are opened direct_io (a read(2) reads the state of its open), and the kernel maps them
shared too since ggufs asks for FUSE_DIRECT_IO_ALLOW_MMAP at INIT (Linux 6.6; before,
a shared mapping is ENODEV, as the man page says).
- metadata/KEY, gguf.json and summary.txt: Python mmap (MAP_SHARED and MAP_PRIVATE) and
  numpy memmap mode 'r' give what a plain read gives, before and after an edit;
- a process keeps an old open's mapping of gguf.json and a key, dropping and faulting
  its pages again and again (the kernel refills the one page cache of the inode
  through that old open), while edits change them: every mapping made after an edit
  has the new state whole, never a page of an old state, 40 rounds;
- a writable shared mapping of a key (O_RDWR, MAP_SHARED, PROT_WRITE) makes its bytes
  the value: at msync and close, or after the close when it is unmapped later (the
  kernel writes the pages back then, and the release commits them); bytes that do
  not parse are refused (msync fails with EINVAL, the old value stays, a new mapping
  shows it);
- the same with -s (one thread), whose edits then leave the pages for the kernel to
  drop at the next open;
- on a kernel before 6.6: a shared mapping is ENODEV, a private one maps."""
import ctypes
import errno
import mmap
import os
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

import ggufs_mount as gm

ROUNDS = 40
TIME_LIMIT = 120.0   # seconds for all rounds: a failure, never a hang


def kernel_maps_direct_io_shared():
    """True on Linux 6.6 or later (FUSE_DIRECT_IO_ALLOW_MMAP)."""
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 6)


def mapped(path, flags, prot=mmap.PROT_READ):
    """The bytes of a new open of path, mapped whole with flags."""
    with open(path, "rb") as f:
        with mmap.mmap(f.fileno(), 0, flags, prot) as mm:
            return bytes(mm)


def memmapped(path):
    """The bytes of path through numpy's memmap, mode 'r' (a shared mapping)."""
    a = np.memmap(path, dtype=np.uint8, mode="r")
    try:
        return a.tobytes()
    finally:
        a._mmap.close()


# The old reader: opens and maps gguf.json and a key once, then until stdin closes
# drops the pages of its mappings (madvise, then fadvise on its open) and faults them
# all in again, through its old open.
OLD_READER = r"""
import mmap, os, select, sys
maps = []
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    maps.append((fd, mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_SHARED, mmap.PROT_READ)))
print("mapped", flush=True)
passes = 0
while not select.select([sys.stdin], [], [], 0)[0] and passes < 1000000:
    for fd, m in maps:
        m.madvise(mmap.MADV_DONTNEED)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        bytes(m)
    passes += 1
print(passes, flush=True)
"""

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.mmap.restype = ctypes.c_void_p
LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


@unittest.skipUnless(kernel_maps_direct_io_shared(), "Linux < 6.6: shared mappings ENODEV")
class EditsMmap(gm.ScratchCase):
    prefix = "ggufs-edits-mmap-"
    folders = {}

    def setUp(self):
        super().setUp()
        self.file = os.path.join(self.tmp, "fix.json")

    def mount(self, opts=()):
        return gm.Mount(gm.TINY, ["-o", "edits=" + self.file] + list(opts))

    def check_maps(self, paths):
        for p in paths:
            want = gm.read_file(p)
            self.assertEqual(mapped(p, mmap.MAP_SHARED), want, p)
            self.assertEqual(mapped(p, mmap.MAP_PRIVATE), want, p)
            self.assertEqual(memmapped(p), want, p)

    def test_shared_maps_before_and_after_edit(self):
        with self.mount() as m:
            changed = [m.p("metadata", "general.name"), m.p("gguf.json"), m.p("summary.txt"),
                       m.p("metadata", "tokenizer.ggml.tokens")]
            self.check_maps(changed)
            gm.put(changed[0], b"mapped after\n")
            self.check_maps(changed)
            self.assertEqual(mapped(changed[0], mmap.MAP_SHARED), b"mapped after\n")
            self.assertIn(b'"mapped after"', memmapped(changed[1]))
            gm.put(changed[0], b"x" * 9000 + b"\n")   # longer than a page: sizes move
            self.check_maps(changed)
            for p in (m.p("model.gguf"), m.p("tensors", "output_norm.weight")):
                self.assertEqual(mapped(p, mmap.MAP_SHARED)[:64], gm.read_file(p)[:64], p)

    def test_old_open_refilling_never_shows(self, opts=()):
        """A mapping made after an edit never holds a page of an old state, though an
        old open keeps faulting that state's pages into the inode's one page cache."""
        with self.mount(opts) as m:
            key, doc = m.p("metadata", "general.name"), m.p("gguf.json")
            gm.put(key, b"v0-" + b"o" * 6000 + b"\n")
            old = subprocess.Popen([sys.executable, "-c", OLD_READER, key, doc],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            try:
                self.assertEqual(old.stdout.readline(), b"mapped\n")
                start = time.monotonic()
                for i in range(ROUNDS):
                    self.assertLess(time.monotonic() - start, TIME_LIMIT)
                    # longer each time, written over without O_TRUNC: the old reader
                    # touches its whole mapping, which past the file's end (for a
                    # while 0 after an O_TRUNC open) is SIGBUS, as with any file
                    value = b"v%d-" % (i + 1) + b"n" * (7000 + 100 * i) + b"\n"
                    gm.put(key, value, os.O_WRONLY)
                    for flags in (mmap.MAP_SHARED, mmap.MAP_PRIVATE):
                        got = mapped(key, flags)
                        self.assertTrue(got == value, "round %d %d: key %r..." % (i, flags, got[:8]))
                        got = mapped(doc, flags)
                        self.assertTrue(value[:-1] in got and got == gm.read_file(doc),
                                        "round %d %d: gguf.json of another state" % (i, flags))
                    self.assertTrue(memmapped(key) == value, "round %d: memmap" % i)
            finally:
                old.stdin.close()
                passes = int(old.stdout.readline() or 0)
                old.stdout.close()
                self.assertEqual(old.wait(timeout=30), 0)
            self.assertGreater(passes, ROUNDS)   # it did refill while the edits went on

    def test_single_thread(self):
        """With -s the same holds, and no edit waits on the kernel for a page that only
        the one thread could fill (it did: the mount hung)."""
        self.test_old_open_refilling_never_shows(["-s"])
        os.unlink(self.file)
        self.test_writable_shared_mapping(["-s"])

    def test_writable_shared_mapping(self, opts=()):
        with self.mount(opts) as m:
            key = m.p("metadata", "general.name")
            # msync, then close: the value is the mapping's bytes
            with open(key, "r+b") as f:
                with mmap.mmap(f.fileno(), 0) as mm:
                    self.assertEqual(bytes(mm), b"tinyllama-test\n")
                    mm[0:4] = b"TINY"
                    mm.flush()
            self.assertEqual(gm.read_file(key), b"TINYllama-test\n")
            self.assertEqual(mapped(key, mmap.MAP_SHARED), b"TINYllama-test\n")
            self.assertIn(b'"TINYllama-test"', gm.read_file(m.p("gguf.json")))

            # closed first, written and unmapped after: the release commits it
            fd = os.open(key, os.O_RDWR)
            size = os.fstat(fd).st_size
            addr = LIBC.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED,
                             fd, 0)
            self.assertNotEqual(addr, ctypes.c_void_p(-1).value)
            os.close(fd)
            ctypes.memmove(addr, b"late", 4)
            self.assertEqual(LIBC.munmap(addr, size), 0)
            deadline = time.monotonic() + 10
            while gm.read_file(key) != b"latellama-test\n" and time.monotonic() < deadline:
                time.sleep(0.05)   # the release reaches the daemon after munmap returns
            self.assertEqual(gm.read_file(key), b"latellama-test\n")
            self.assertEqual(mapped(key, mmap.MAP_SHARED), b"latellama-test\n")

            # bytes that do not parse as the key's type: refused, the old value stays
            num = m.p("metadata", "llama.context_length")
            fd = os.open(num, os.O_RDWR)
            try:
                with mmap.mmap(fd, 0) as mm:
                    mm[0:2] = b"zz"
                    with self.assertRaises(OSError) as e:
                        mm.flush()
                    self.assertEqual(e.exception.errno, errno.EINVAL)
            finally:
                try:
                    os.close(fd)
                except OSError:
                    pass   # the refusal may be told again at close
            self.assertEqual(gm.read_file(num), b"2048\n")
            self.assertEqual(mapped(num, mmap.MAP_SHARED), b"2048\n")
        with self.mount(opts) as m:   # what was made is in FILE
            self.assertEqual(gm.read_file(m.p("metadata", "general.name")), b"latellama-test\n")
            self.assertEqual(gm.read_file(m.p("metadata", "llama.context_length")), b"2048\n")


@unittest.skipIf(kernel_maps_direct_io_shared(), "Linux 6.6 or later maps them shared")
class EditsMmapOldKernel(unittest.TestCase):
    def test_shared_enodev_private_maps(self):
        with tempfile.TemporaryDirectory(prefix="ggufs-edits-mmap-") as d:
            with gm.Mount(gm.TINY, ["-o", "edits=" + os.path.join(d, "fix.json")]) as m:
                for p in (m.p("metadata", "general.name"), m.p("gguf.json")):
                    self.assertEqual(mapped(p, mmap.MAP_PRIVATE), gm.read_file(p), p)
                    with self.assertRaises(OSError) as e:
                        mapped(p, mmap.MAP_SHARED)
                    self.assertEqual(e.exception.errno, errno.ENODEV, p)


if __name__ == "__main__":
    gm.main()
