#!/usr/bin/env python3
"""Shutdown: SIGINT, SIGTERM and SIGHUP unmount cleanly and exit 0, in the foreground
and as a daemon; an unmount while readers are in the middle of large reads ends the
daemon cleanly, and so does a signal then.

The daemon's exit status in daemon mode is seen by making this process a child
subreaper: the daemon, orphaned by ggufs's fork, is reparented here and can be waited
for. Its sanitizer reports go to log files (its stderr is /dev/null)."""
import ctypes
import errno
import os
import signal
import subprocess
import threading
import time
import unittest

import ggufs_mount as gm

# A signal ignored at the daemon's start stays ignored (libfuse keeps it so, and the man
# page says it): a suite run under nohup would make ggufs deaf to SIGHUP, and these tests
# are of ggufs's handling, so its daemons start with SIGHUP as it is by default.
signal.signal(signal.SIGHUP, signal.SIG_DFL)

PR_SET_CHILD_SUBREAPER = 36
BIG = ["output.weight.f32", "token_embd.weight.f32", "output.weight.npy", "token_embd.weight.npy"]


def daemon_pid(mountpoint):
    """The pid of the one ggufs process with mountpoint on its command line."""
    pids = gm.ggufs_processes(mountpoint)
    assert len(pids) == 1, pids
    return pids[0]


def wait_pid(pid, timeout):
    """waitpid with a deadline: the exit code, or None if it is still running."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


def in_proc_mounts(path):
    with open("/proc/mounts") as f:
        return any(line.split()[1] == path for line in f)


class Readers:
    """Four threads reading the large .f32/.npy files of a mount with O_DIRECT, in
    64 KiB slices, over and over, each checking its bytes against the reference,
    until stopped or until a read fails (which is recorded, not raised)."""

    def __init__(self, m, ref):
        self.m = m
        self.ref = ref
        self.stop = False
        self.errors = {}
        self.bytes = [0] * len(BIG)
        self.bad = []
        self.threads = [threading.Thread(target=self.run, args=(i, n)) for i, n in enumerate(BIG)]
        for t in self.threads:
            t.start()

    def run(self, i, name):
        want = self.ref[name]
        try:
            while not self.stop:
                fd = os.open(self.m.p("tensors", name), os.O_RDONLY | os.O_DIRECT)
                try:
                    off = 0
                    while off < len(want) and not self.stop:
                        b = os.pread(fd, 65536, off)
                        if b != want[off:off + len(b)] or not b:
                            self.bad.append("%s at %d" % (name, off))
                            return
                        off += len(b)
                        self.bytes[i] += len(b)
                finally:
                    os.close(fd)
        except OSError as e:
            self.errors[name] = e.errno

    def wait_reading(self):
        """Until every thread has read something."""
        deadline = time.monotonic() + 20
        while not all(self.bytes) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(self.bytes), self.bytes

    def join(self, timeout=20):
        self.stop = True
        for t in self.threads:
            t.join(timeout)
        return not any(t.is_alive() for t in self.threads)


class Shutdown(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
        with gm.Mount(gm.TINY) as m:
            cls.ref = {n: gm.read_file(m.p("tensors", n)) for n in BIG}

    def setUp(self):
        self.tmp = gm.public_tmpdir()
        self.mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(self.mnt)

    def tearDown(self):
        if gm.is_mounted(self.mnt):
            gm.unmount(self.mnt)
        for f in os.listdir(self.tmp):
            if f != "mnt":
                os.unlink(os.path.join(self.tmp, f))
        os.rmdir(self.mnt)
        os.rmdir(self.tmp)

    def sanitizer_env(self):
        env = dict(os.environ)
        log = os.path.join(self.tmp, "san")
        for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            env[var] = (env.get(var, "") + ":log_path=" + log).lstrip(":")
        return env

    def sanitizer_logs(self):
        return "".join(open(os.path.join(self.tmp, f)).read()
                       for f in os.listdir(self.tmp) if f.startswith("san"))

    def test_signals_daemon_mode(self):
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with self.subTest(signal=sig.name):
                r = gm.run_ggufs([gm.TINY, self.mnt], env=self.sanitizer_env())
                self.assertEqual(r.returncode, 0, r.stderr)
                pid = daemon_pid(self.mnt)
                rc = None
                try:
                    self.assertEqual(gm.read_file(os.path.join(self.mnt, "metadata", "general.name")),
                                     b"tinyllama-test\n")
                    os.kill(pid, sig)
                    rc = wait_pid(pid, 20)
                    self.assertEqual(rc, 0)
                    self.assertFalse(in_proc_mounts(self.mnt))
                    self.assertEqual(os.listdir(self.mnt), [])
                    self.assertEqual(self.sanitizer_logs(), "")
                finally:
                    if rc is None:
                        os.kill(pid, signal.SIGKILL)
                        os.waitpid(pid, 0)

    def test_signals_foreground(self):
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with self.subTest(signal=sig.name):
                m = gm.Mount(gm.TINY, mountpoint=self.mnt)
                m.__enter__()
                try:
                    os.listdir(self.mnt)
                    m.proc.send_signal(sig)
                    self.assertEqual(m.proc.wait(20), 0, m.stderr())
                    self.assertFalse(in_proc_mounts(self.mnt))
                finally:
                    m.__exit__(None, None, None)  # checks the exit status and stderr

    def test_unmount_during_reads(self):
        """fusermount3 -u while four readers are in the middle of reads is refused
        (busy) and changes nothing; a lazy unmount (-z) detaches at once, the readers
        finish or get errors, and the daemon ends cleanly once they let go."""
        with gm.Mount(gm.TINY, mountpoint=self.mnt) as m:
            readers = Readers(m, self.ref)
            try:
                readers.wait_reading()
                r = subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True, timeout=20)
                self.assertNotEqual(r.returncode, 0)
                self.assertIn(b"busy", r.stderr)
                self.assertTrue(gm.is_mounted(self.mnt))
                before = sum(readers.bytes)
                time.sleep(0.2)
                self.assertGreater(sum(readers.bytes), before, "reads go on")
                self.assertEqual(readers.errors, {})

                r = subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True,
                                   timeout=20)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertFalse(in_proc_mounts(self.mnt))
                time.sleep(0.2)
            finally:
                self.assertTrue(readers.join(), "a reader hangs")
            self.assertEqual(readers.bad, [])
            # a new open finds the empty directory; the open ones were served or cut off
            for e in readers.errors.values():
                self.assertIn(e, (errno.ENOENT, errno.ENOTCONN, errno.ECONNABORTED))
            self.assertEqual(m.proc.wait(20), 0, m.stderr())
        # Mount's exit checked the status and stderr again (no sanitizer report)

    def test_signal_during_reads(self):
        """SIGTERM while four readers are in the middle of reads: the daemon unmounts
        and exits 0; the readers get errors, none hangs."""
        with gm.Mount(gm.TINY, mountpoint=self.mnt) as m:
            readers = Readers(m, self.ref)
            try:
                readers.wait_reading()
                m.proc.send_signal(signal.SIGTERM)
                self.assertEqual(m.proc.wait(20), 0, m.stderr())
                self.assertFalse(in_proc_mounts(self.mnt))
                deadline = time.monotonic() + 20
                while len(readers.errors) < len(BIG) and time.monotonic() < deadline:
                    time.sleep(0.01)
            finally:
                self.assertTrue(readers.join(), "a reader hangs")
            self.assertEqual(readers.bad, [])
            self.assertEqual(len(readers.errors), len(BIG), readers.errors)
            for e in readers.errors.values():
                self.assertIn(e, (errno.ENOENT, errno.ENOTCONN, errno.ECONNABORTED))


if __name__ == "__main__":
    gm.main()
