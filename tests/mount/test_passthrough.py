#!/usr/bin/env python3
"""model.gguf with FUSE passthrough (issue 30):
- a single local file's model.gguf is opened with passthrough where the kernel offers
  it: user.ggufs.passthrough says yes, a whole read and an mmap give the file's sha256,
  and neither reaches the daemon (the root's user.ggufs.reads does not move); an
  O_DIRECT open still reads through the daemon, with the right bytes; with -d the one
  backing id is opened at INIT and closed at unmount; -o clone_fd passes through too;
- the file cut short under a passthrough open reads as the file itself then reads: a
  short read at the cut, nothing past it, SIGBUS for an mmap past it;
- with -o edits: passthrough until the first edit, then a normal open with the edited
  bytes while an open from before it still reads the file; an edit undone makes the
  next open pass through again;
- everything else is served as before, read by the daemon, with the reason in the
  attribute and nothing logged: -o passthrough=no, a split model, a remote model;
  -o passthrough=maybe is refused as a wrong argument.
The passthrough cases are skipped, with the kernel's reason, only where the kernel does
not offer passthrough (before Linux 6.9, or without CONFIG_FUSE_PASSTHROUGH)."""
import errno
import hashlib
import mmap
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import ggufs_mount as gm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "remote"))
from remote_common import split_gguf  # noqa: E402
from servers import FaultServer  # noqa: E402

XATTR = "user.ggufs.passthrough"
KERNEL_REASONS = ("the kernel does not offer FUSE passthrough", "the kernel speaks FUSE 7.")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def sha256_mmap(path):
    with open(path, "rb") as f:
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
            return hashlib.sha256(mm).hexdigest()


def reads(m):
    return int(os.getxattr(m.path, "user.ggufs.reads"))


def state(m):
    return os.getxattr(m.p("model.gguf"), XATTR).decode()


def skip_without_kernel_passthrough(tc, m):
    """Skips tc when the mount says the kernel has no passthrough; any other reason
    than yes is a failure."""
    why = state(m)
    if any(why.startswith(r) for r in KERNEL_REASONS):
        tc.skipTest("kernel without FUSE passthrough: " + why)
    tc.assertEqual(why, "yes")


class MappedChild:
    """A child that maps path whole, then at go() reads the byte at each offset in turn,
    printing each: result() is (its exit status, the bytes it printed), -SIGBUS once a
    page it touched is gone."""
    CODE = ("import mmap, os, sys\n"
            "f = open(sys.argv[1], 'rb')\n"
            "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n"
            "sys.stdout.write('mapped\\n'); sys.stdout.flush()\n"
            "sys.stdin.readline()\n"
            "for o in sys.argv[2:]:\n"
            "    os.write(1, m[int(o):int(o) + 1])\n")

    def __init__(self, path, *offsets):
        self.proc = subprocess.Popen([sys.executable, "-c", self.CODE, path] +
                                     [str(o) for o in offsets], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.proc.stdout.readline() == b"mapped\n"

    def result(self):
        out, _ = self.proc.communicate(b"go\n", timeout=30)
        return self.proc.returncode, out


def wait_until(pred, timeout=5.0):
    """Polls pred (the kernel sends RELEASE after close returns) until true or timeout."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class Passthrough(unittest.TestCase):
    def test_reads_and_mmap_skip_the_daemon(self):
        with gm.Mount(gm.TINY) as m:
            skip_without_kernel_passthrough(self, m)
            self.assertIn(XATTR, os.listxattr(m.p("model.gguf")))
            before = reads(m)
            want = sha256_file(gm.TINY)
            self.assertEqual(sha256_file(m.p("model.gguf")), want)
            self.assertEqual(sha256_mmap(m.p("model.gguf")), want)
            # a copy as cp makes it: sendfile/copy_file_range pass through too
            d = tempfile.mkdtemp(prefix="ggufs-pt-")
            try:
                shutil.copyfile(m.p("model.gguf"), os.path.join(d, "copy"))
                self.assertEqual(sha256_file(os.path.join(d, "copy")), want)
            finally:
                shutil.rmtree(d)
            self.assertEqual(reads(m), before, "a read of model.gguf reached the daemon")
            # the rest of the tree is still the daemon's
            gm.read_file(m.p("summary.txt"))
            self.assertGreater(reads(m), before)
            self.assertEqual(m.stderr(), "")

    def test_clone_fd(self):
        """With a /dev/fuse descriptor per thread, the backing id is the session's."""
        with gm.Mount(gm.TINY, ["-o", "clone_fd"]) as m:
            skip_without_kernel_passthrough(self, m)
            before = reads(m)
            self.assertEqual(sha256_file(m.p("model.gguf")), sha256_file(gm.TINY))
            self.assertEqual(reads(m), before)

    def test_o_direct_reads_through_the_daemon(self):
        data = gm.read_file(gm.TINY)
        with gm.Mount(gm.TINY) as m:
            skip_without_kernel_passthrough(self, m)
            before = reads(m)
            self.assertEqual(gm.pread_direct(m.p("model.gguf"), 65536, 12345),
                             data[12345:12345 + 65536])
            self.assertGreater(reads(m), before)
            # and a passthrough open beside it still reads the file
            with open(m.p("model.gguf"), "rb") as f:
                self.assertEqual(f.read(), data)

    def test_backing_id_closed_at_unmount(self):
        """-d says each backing id opened and closed: one, at INIT, closed at unmount
        after the opens that used it."""
        d = gm.public_tmpdir()
        mnt = os.path.join(d, "mnt")
        os.mkdir(mnt)
        err = tempfile.TemporaryFile()
        proc = subprocess.Popen([gm.GGUFS, "-d", gm.TINY, mnt], stdin=subprocess.DEVNULL,
                                stdout=err, stderr=err)
        try:
            self.assertTrue(wait_until(lambda: gm.is_mounted(mnt), gm.MOUNT_TIMEOUT))
            why = os.getxattr(os.path.join(mnt, "model.gguf"), XATTR).decode()
            if any(why.startswith(r) for r in KERNEL_REASONS):
                self.skipTest("kernel without FUSE passthrough: " + why)
            for _ in range(3):
                self.assertEqual(sha256_file(os.path.join(mnt, "model.gguf")),
                                 sha256_file(gm.TINY))
        finally:
            gm.unmount(mnt)
            rc = proc.wait(timeout=gm.MOUNT_TIMEOUT)
            os.rmdir(mnt)
            os.rmdir(d)
        err.seek(0)
        text = err.read().decode(errors="replace")
        err.close()
        self.assertEqual(rc, 0, text[-2000:])
        opened = re.findall(r"passthrough: backing id (\d+) opened", text)
        closed = re.findall(r"passthrough: backing id (\d+) closed", text)
        self.assertEqual(len(opened), 1, text[-2000:])
        self.assertEqual(closed, opened)
        self.assertLess(text.index("backing id %s opened" % opened[0]),
                        text.index("backing id %s closed" % opened[0]))

    def test_shrunk_file_reads_as_the_file(self):
        d = tempfile.mkdtemp(prefix="ggufs-pt-")
        try:
            model = os.path.join(d, "m.gguf")
            shutil.copyfile(gm.TINY, model)
            data = gm.read_file(model)
            cut = 2500000
            with gm.Mount(model) as m:
                skip_without_kernel_passthrough(self, m)
                p = m.p("model.gguf")
                fd = os.open(p, os.O_RDONLY)
                own = os.open(model, os.O_RDONLY)
                try:
                    os.truncate(model, cut)
                    before = reads(m)
                    for off, n in ((cut - 4096, 65536), (cut, 4096), (cut + 8192, 4096),
                                   (1 << 20, 65536)):
                        got = os.pread(fd, n, off)
                        self.assertEqual(got, os.pread(own, n, off), (off, n))
                        self.assertEqual(got, data[off:min(off + n, cut)], (off, n))
                    self.assertEqual(reads(m), before)
                finally:
                    os.close(fd)
                    os.close(own)
                shutil.copyfile(gm.TINY, model)
                with open(p, "rb") as f:   # a fresh open: the kernel's backing file
                    self.assertEqual(f.read(), data)
                mapped = [MappedChild(path, 1 << 20, cut + 65536) for path in (p, model)]
                os.truncate(model, cut)
                for child in mapped:
                    self.assertEqual(child.result(), (-signal.SIGBUS, data[1 << 20:(1 << 20) + 1]))
                self.assertEqual(reads(m), before)
                self.assertIsNone(m.proc.poll(), "the daemon lives")
        finally:
            shutil.rmtree(d)

    def test_edits(self):
        """With -o edits: passthrough until the first edit; the next open reads the
        edited model.gguf through the daemon (a new inode: the kernel allows one kind of
        open per file) while one from before still reads the file itself; an edit
        undone passes through again."""
        d = tempfile.mkdtemp(prefix="ggufs-pt-")
        try:
            edits = os.path.join(d, "edits.json")
            data = gm.read_file(gm.TINY)
            with gm.Mount(gm.TINY, ["-o", "edits=" + edits]) as m:
                skip_without_kernel_passthrough(self, m)
                p, key = m.p("model.gguf"), m.p("metadata", "general.name")
                old = gm.read_file(key)
                before = reads(m)
                with open(p, "rb") as held:
                    self.assertEqual(held.read(4096), data[:4096])
                    with open(key, "w") as f:
                        f.write("an edited name\n")
                    self.assertTrue(state(m).startswith("edited"), state(m))
                    edited = gm.read_file(p)
                    self.assertIn(b"an edited name", edited)
                    self.assertNotEqual(edited, data)
                    self.assertGreater(reads(m), before)
                    mid = reads(m)
                    self.assertEqual(held.read(), data[4096:])   # the file itself, still
                    self.assertEqual(reads(m), mid)
                with open(key, "wb") as f:
                    f.write(old)
                self.assertEqual(state(m), "yes")
                mid = reads(m)
                self.assertEqual(sha256_file(p), sha256_file(gm.TINY))
                self.assertEqual(sha256_mmap(p), sha256_file(gm.TINY))
                self.assertEqual(reads(m), mid)
                self.assertEqual(m.stderr(), "")
        finally:
            shutil.rmtree(d)


class Fallback(unittest.TestCase):
    def check_served(self, m, want, why):
        self.assertEqual(state(m), why)
        before = reads(m)
        self.assertEqual(sha256_file(m.p("model.gguf")), want)
        self.assertEqual(sha256_mmap(m.p("model.gguf")), want)
        self.assertGreater(reads(m), before, "model.gguf was not read through the daemon")
        self.assertEqual(m.stderr(), "")

    def test_off(self):
        with gm.Mount(gm.TINY, ["-o", "passthrough=no"]) as m:
            self.check_served(m, sha256_file(gm.TINY), "off (-o passthrough=no)")
        with gm.Mount(gm.TINY, ["-o", "passthrough=yes"]) as m:
            self.assertNotEqual(state(m), "off (-o passthrough=no)")

    def test_wrong_value_refused(self):
        r = gm.run_ggufs(["-o", "passthrough=maybe", gm.TINY, "/nonexistent"])
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.decode(), "ggufs: option '-o passthrough=maybe' takes yes or "
                                             "no (ggufs --help lists them)\n")

    def test_split(self):
        d = tempfile.mkdtemp(prefix="ggufs-pt-")
        try:
            shards = split_gguf(gm.TINY, d, "tiny", 3)
            with gm.Mount(shards[0]) as m:
                self.check_served(m, sha256_file(gm.TINY), "a split model, merged here")
        finally:
            shutil.rmtree(d)

    def test_remote(self):
        data = gm.read_file(gm.TINY)
        with FaultServer({"/m.gguf": data}) as s:
            with gm.Mount(s.url + "/m.gguf") as m:
                self.check_served(m, hashlib.sha256(data).hexdigest(), "a remote model")

    def test_edited_at_mount(self):
        d = tempfile.mkdtemp(prefix="ggufs-pt-")
        try:
            edits = os.path.join(d, "edits.json")
            with gm.Mount(gm.TINY, ["-o", "edits=" + edits]) as m:
                with open(m.p("metadata", "general.name"), "w") as f:
                    f.write("another name\n")
            with gm.Mount(gm.TINY, ["-o", "edits=" + edits]) as m:
                self.assertTrue(state(m).startswith("edited"), state(m))
                before = reads(m)
                self.assertIn(b"another name", gm.read_file(m.p("model.gguf")))
                self.assertGreater(reads(m), before)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    gm.main()
