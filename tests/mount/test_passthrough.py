#!/usr/bin/env python3
"""model.gguf with FUSE passthrough (issue 30):
- a single local file's model.gguf is opened with passthrough where the kernel offers
  it: user.ggufs.passthrough says yes, a whole read and an mmap give the file's sha256,
  and neither reaches the daemon (the root's user.ggufs.reads does not move); an
  O_DIRECT open still reads through the daemon, with the right bytes; with -d the one
  backing id is opened at the first open and closed at unmount; -o clone_fd passes
  through too;
- the file cut short under a passthrough open reads as the file itself then reads: a
  short read at the cut, nothing past it, SIGBUS for an mmap past it;
- with -o edits: passthrough until the first edit, then a normal open with the edited
  bytes while an open from before it still reads the file; an edit undone makes the
  next open pass through again;
- everything else is served as before, read by the daemon, with the reason in the
  attribute and nothing logged: -o passthrough=no, a split model, a remote model;
  -o passthrough=maybe is refused as a wrong argument;
- in a local library (a folder), model.gguf of each single-file model passes through
  as on a single mount (the attribute, the file's sha256 by read and mmap, no read
  reaching the daemon), a split one is merged by the daemon; a model file replaced in
  the folder (renamed over, or rewritten in place) gives the new bytes to a new open
  while one from before reads the old file; a second open of a model.gguf already open
  shares its backing id (the kernel allows one backing file per inode); with -d each
  backing id is opened at an inode's first open and closed after its last release; a
  mapping outlives its model released from the idle cache, and the model built again
  passes through again; a model file the kernel refuses (a symlink to a file on another
  FUSE mount) says why before any open and is served by the daemon, logged once;
  -o passthrough=no serves a library as before.
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
from fault_server import FaultServer  # noqa: E402

XATTR = "user.ggufs.passthrough"
KEEP_IDLE = 8  # LIB_KEEP_IDLE in lib/7-library/library.h: built models kept idle
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


def state_of(path):
    return os.getxattr(path, XATTR).decode()


def state(m):
    return state_of(m.p("model.gguf"))


def xattr_int(path, name):
    return int(os.getxattr(path, name))


def skip_without_kernel_passthrough(tc, m):
    """Skips tc when the mount says the kernel has no passthrough; any other reason
    than yes is a failure."""
    why = state(m)
    if any(why.startswith(r) for r in KERNEL_REASONS):
        tc.skipTest("kernel without FUSE passthrough: " + why)
    tc.assertEqual(why, "yes")


def debug_mount(model, body, opts=()):
    """Mounts model with ggufs -d, runs body(mountpoint), unmounts: the daemon's stderr
    (each backing id opened and closed is said there), after checking it exited 0."""
    d = gm.public_tmpdir()
    mnt = os.path.join(d, "mnt")
    os.mkdir(mnt)
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([gm.GGUFS, "-d"] + list(opts) + [model, mnt],
                            stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    try:
        assert wait_until(lambda: gm.is_mounted(mnt), gm.MOUNT_TIMEOUT), "not mounted"
        body(mnt)
    finally:
        gm.unmount(mnt)
        rc = proc.wait(timeout=gm.MOUNT_TIMEOUT)
        os.rmdir(mnt)
        os.rmdir(d)
        err.seek(0)
        text = err.read().decode(errors="replace")
        err.close()
    assert rc == 0, text[-2000:]
    return text


def backing_ids(text):
    """[(opened or closed, id)] in the order -d said them."""
    return [(w, int(i)) for i, w in
            re.findall(r"passthrough: backing id (\d+) (opened|closed)", text)]


class MappedChild:
    """A child that maps path whole (and closes it, with close: mmap(2) itself, since
    Python's mmap keeps a descriptor of its own), then at go() reads the byte at each
    offset in turn, printing each: result() is (its exit status, the bytes it printed),
    -SIGBUS once a page it touched is gone."""
    CODE = ("import ctypes, mmap, os, sys\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "libc.mmap.restype = ctypes.c_void_p\n"
            "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,\n"
            "                      ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
            "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
            "at = libc.mmap(None, os.fstat(fd).st_size, mmap.PROT_READ, mmap.MAP_SHARED,\n"
            "               fd, 0)\n"
            "assert at not in (None, ctypes.c_void_p(-1).value)\n"
            "if sys.argv[2] == 'close': os.close(fd)\n"
            "sys.stdout.write('mapped\\n'); sys.stdout.flush()\n"
            "sys.stdin.readline()\n"
            "for o in sys.argv[3:]:\n"
            "    os.write(1, ctypes.string_at(at + int(o), 1))\n")

    def __init__(self, path, *offsets, close=False):
        self.proc = subprocess.Popen([sys.executable, "-c", self.CODE, path,
                                      "close" if close else "keep"] +
                                     [str(o) for o in offsets], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.proc.stdout.readline() == b"mapped\n"

    def result(self):
        out, _ = self.proc.communicate(b"go\n", timeout=30)
        return self.proc.returncode, out

    def end(self):
        """Kills the child unless it is gone (a failed test must not leave the mount
        busy)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


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
        """-d says each backing id opened and closed: one, at the first open (or the
        first question of the attribute), closed at unmount after the opens that used
        it; of the three closes only the first is sent to the daemon (FLUSH)."""
        def body(mnt):
            why = os.getxattr(os.path.join(mnt, "model.gguf"), XATTR).decode()
            if any(why.startswith(r) for r in KERNEL_REASONS):
                self.skipTest("kernel without FUSE passthrough: " + why)
            for _ in range(3):
                self.assertEqual(sha256_file(os.path.join(mnt, "model.gguf")),
                                 sha256_file(gm.TINY))
        text = debug_mount(gm.TINY, body)
        ids = backing_ids(text)
        self.assertEqual(len(ids), 2, ids)
        self.assertEqual(ids, [("opened", ids[0][1]), ("closed", ids[0][1])])
        # a close waits for no daemon: the first FLUSH is told ENOSYS, the kernel sends
        # no more (without edits there is nothing to flush)
        self.assertEqual(text.count("opcode: FLUSH"), 1, text[-2000:])

    def test_shrunk_file_reads_as_the_file(self):
        with gm.model_copy("ggufs-pt-") as (model, data):
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


def small_model(path, seed, size=1 << 16):
    """A single-file model of size bytes of random data (seed names it)."""
    gm.write_gguf(path, [("general.architecture", "none"), ("general.name", "m%d" % seed)],
                  [("data", [size // 4], gm.GGML_F32, os.urandom(size))])


class Library(gm.ScratchCase):
    """model.gguf inside a local library (a folder of models)."""

    prefix = "ggufs-pt-lib-"
    folders = {"src": "models"}

    def skip_without(self, path):
        why = os.getxattr(path, XATTR).decode()
        if any(why.startswith(r) for r in KERNEL_REASONS):
            self.skipTest("kernel without FUSE passthrough: " + why)
        self.assertEqual(why, "yes")

    def test_models_pass_through(self):
        shutil.copyfile(gm.TINY, os.path.join(self.src, "tiny.gguf"))
        os.mkdir(os.path.join(self.src, "sub"))
        small = os.path.join(self.src, "sub", "small.gguf")
        small_model(small, 1)
        split_gguf(gm.TINY, self.src, "parts", 3)
        with gm.Mount(self.src) as m:
            tiny, other = m.p("tiny", "model.gguf"), m.p("sub", "small", "model.gguf")
            self.skip_without(tiny)
            self.assertEqual(state_of(other), "yes")
            self.assertIn(XATTR, os.listxattr(tiny))
            self.assertNotIn(XATTR, os.listxattr(m.p("tiny", "summary.txt")))
            before = reads(m)
            for path, want in ((tiny, sha256_file(gm.TINY)), (other, sha256_file(small))):
                self.assertEqual(sha256_file(path), want)
                self.assertEqual(sha256_mmap(path), want)
            self.assertEqual(reads(m), before, "a read of model.gguf reached the daemon")
            # O_DIRECT reads come to the daemon, as on a single mount
            self.assertEqual(gm.pread_direct(tiny, 65536, 12345),
                             gm.read_file(gm.TINY)[12345:12345 + 65536])
            self.assertGreater(reads(m), before)
            before = reads(m)
            # a split model is merged by the daemon, as on a single mount
            merged = m.p("parts", "model.gguf")
            self.assertEqual(state_of(merged), "a split model, merged here")
            self.assertEqual(sha256_file(merged), sha256_file(gm.TINY))
            self.assertGreater(reads(m), before)
            self.assertEqual(m.stderr(), "")

    def test_clone_fd(self):
        """With a /dev/fuse descriptor per thread, a backing id asked for at an open
        (on the session's descriptor) serves it too."""
        small = os.path.join(self.src, "a.gguf")
        small_model(small, 1)
        with gm.Mount(self.src, ["-o", "clone_fd"]) as m:
            p = m.p("a", "model.gguf")
            self.skip_without(p)
            before = reads(m)
            self.assertEqual(sha256_file(p), sha256_file(small))
            self.assertEqual(sha256_mmap(p), sha256_file(small))
            self.assertEqual(reads(m), before)

    def test_replaced_file_gives_the_new_bytes(self):
        model = os.path.join(self.src, "a.gguf")
        small_model(model, 1)
        first = gm.read_file(model)
        with gm.Mount(self.src) as m:
            p = m.p("a", "model.gguf")
            self.skip_without(p)
            with open(p, "rb") as held:
                self.assertEqual(held.read(4096), first[:4096])
                # renamed over: a new file, a new inode in the mount
                small_model(model + ".new", 2)
                second = gm.read_file(model + ".new")
                os.replace(model + ".new", model)
                before = reads(m)
                self.assertEqual(state_of(p), "yes")
                self.assertEqual(gm.read_file(p), second)
                self.assertEqual(held.read(), first[4096:])   # the old file, still
                self.assertEqual(reads(m), before)
            # rewritten in place, another size
            small_model(os.path.join(self.tmp, "third.gguf"), 3, 1 << 17)
            shutil.copyfile(os.path.join(self.tmp, "third.gguf"), model)
            self.assertEqual(sha256_file(p), sha256_file(model))
            self.assertEqual(sha256_mmap(p), sha256_file(model))
            self.assertEqual(reads(m), before)
            self.assertEqual(m.stderr(), "")

    def test_backing_ids_follow_opens_and_idle_models(self):
        """A backing id per inode while it is open, shared by its opens; a model
        released from the idle cache keeps its mappings and passes
        through again once built again."""
        n = 11
        paths = [os.path.join(self.src, "m%02d.gguf" % i) for i in range(n)]
        for i, path in enumerate(paths):
            small_model(path, i)
        data = [gm.read_file(path) for path in paths]
        counts = {}

        def body(mnt):
            files = [os.path.join(mnt, "m%02d" % i, "model.gguf") for i in range(n)]
            self.skip_without(files[0])
            before = xattr_int(mnt, "user.ggufs.reads")
            with open(files[0], "rb") as held:
                self.assertEqual(held.read(100), data[0][:100])
                # a second open of the same inode: the same backing file, or EIO
                with open(files[0], "rb") as again:
                    self.assertEqual(again.read(), data[0])
                for i in range(1, n):
                    self.assertEqual(gm.read_file(files[i]), data[i])
                self.assertEqual(held.read(), data[0][100:])
            child = MappedChild(files[0], 5, len(data[0]) - 1, close=True)
            try:
                # every other model used since: model 0, the least recently used once
                # its release came, is released (closed, its tree freed); its mapping
                # stays
                for i in range(1, n):
                    self.assertEqual(gm.read_file(files[i]), data[i])
                self.assertTrue(wait_until(
                    lambda: xattr_int(mnt, "user.ggufs.models_built") == KEEP_IDLE))
                opened = xattr_int(mnt, "user.ggufs.models_opened")
                self.assertEqual(child.result(), (0, data[0][5:6] + data[0][-1:]))
            finally:
                child.end()
            self.assertEqual(gm.read_file(files[0]), data[0])
            self.assertEqual(state_of(files[0]), "yes")
            counts["rebuilt"] = xattr_int(mnt, "user.ggufs.models_opened") - opened
            counts["built"] = xattr_int(mnt, "user.ggufs.models_built")
            counts["reads"] = xattr_int(mnt, "user.ggufs.reads") - before

        ids = backing_ids(debug_mount(self.src, body))
        self.assertEqual(counts["rebuilt"], 1, "model 0 was not released and built again")
        self.assertLessEqual(counts["built"], KEEP_IDLE)
        self.assertEqual(counts["reads"], 0, "a read of model.gguf reached the daemon")
        # every id opened is closed after, each once; one open at a time per inode
        live = set()
        for what, i in ids:
            if what == "opened":
                self.assertNotIn(i, live, ids)
                live.add(i)
            else:
                self.assertIn(i, live, ids)
                live.remove(i)
        self.assertEqual(live, set(), ids)
        # an id for each model, up to one per open that had no other open of its inode
        # (model 0: held and again, the child, the last read; each other model two
        # reads), fewer when a release came after the next open; and up to two asked
        # for by the attribute of model 0 while not open, closed at once
        self.assertGreaterEqual(len(ids), 2 * n, ids)
        self.assertLessEqual(len(ids), 2 * (2 + 3 + 2 * (n - 1)), ids)

    def test_kernel_refusal_served_as_before(self):
        """A model file the kernel will not take (on a FUSE mount, through a symlink: a
        deeper stack than the library's folder asked for at INIT) says why before any
        open, is served by the daemon for the mount's life, each open of it alike, and
        is logged once."""
        with gm.Mount(gm.TINY) as single:
            os.symlink(single.p("model.gguf"), os.path.join(self.src, "linked.gguf"))
            small_model(os.path.join(self.src, "own.gguf"), 1)
            with gm.Mount(self.src) as m:
                own, linked = m.p("own", "model.gguf"), m.p("linked", "model.gguf")
                self.skip_without(own)
                why = state_of(linked)
                self.assertTrue(why.startswith("the kernel refused the backing file "
                                               "(FUSE_DEV_IOC_BACKING_OPEN: "), why)
                data = gm.read_file(gm.TINY)
                before = reads(m)
                with open(linked, "rb") as a, open(linked, "rb") as b:
                    self.assertEqual(a.read(), data)
                    self.assertEqual(b.read(4096), data[:4096])
                self.assertEqual(sha256_mmap(linked), sha256_file(gm.TINY))
                self.assertGreater(reads(m), before)
                self.assertEqual(state_of(linked), why)
                self.assertEqual(state_of(own), "yes")
                self.assertEqual(m.stderr().count("model.gguf without passthrough"), 1,
                                 m.stderr())
                self.assertIn("linked.gguf: model.gguf without passthrough: " + why,
                              m.stderr())

    def test_off(self):
        small = os.path.join(self.src, "a.gguf")
        small_model(small, 1)
        with gm.Mount(self.src, ["-o", "passthrough=no"]) as m:
            p = m.p("a", "model.gguf")
            self.assertEqual(state_of(p), "off (-o passthrough=no)")
            before = reads(m)
            self.assertEqual(sha256_file(p), sha256_file(small))
            self.assertEqual(sha256_mmap(p), sha256_file(small))
            self.assertGreater(reads(m), before)
            self.assertEqual(m.stderr(), "")


if __name__ == "__main__":
    gm.main()
