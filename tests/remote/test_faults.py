#!/usr/bin/env python3
"""Faults during reads, on the fault server:
- the file changes under the mount (same size, other bytes; or another size): a read
  of bytes not yet fetched gives EIO, one line says so on stderr, the daemon lives on, and
  what was already served is never mixed with the new version (also when the server
  ignores If-Match and only the response's ETag tells);
- the server stalls, answers 503 to everything, hangs up, cuts every body short, or
  answers another range than asked: with -o timeout=2 a read
  gives EIO within EIO_TIMEOUT, the daemon lives on (the header's files still read),
  and once the server recovers the same read succeeds with the right bytes.
- a few 503s, a 429 with Retry-After (honoured, and capped at 10 s), connections reset
  mid-body, bodies cut short (a Content-Length that agrees with the cut, so only the
  Content-Range tells): the read is retried and succeeds with the right bytes;
- fusermount3 -u -z of a mount with a read waiting on a stalled server: the read fails
  and the daemon ends within seconds.
Every read runs in a child process with a deadline, so a hang fails instead of hanging."""
import errno
import os
import subprocess
import sys
import time
import unittest

from remote_common import (TinyCase, EIO_TIMEOUT, FAILED_HOLD, TINY, EnvMount, FaultServer, gm,
                           range_length, read_bounded)

PATH = "/models/tinyllama-q4km.gguf"


def stalled_reader(path):
    """A child reading 4 KiB of path with O_DIRECT (so the read reaches the daemon): its
    exit status is the read's errno, 0 when it succeeded."""
    return subprocess.Popen(
        [sys.executable, "-c", "import os,sys\ntry:\n os.pread(os.open(sys.argv[1],"
         " os.O_RDONLY|os.O_DIRECT), 4096, 0)\nexcept OSError as e:\n sys.exit(e.errno)",
         path], stdin=subprocess.DEVNULL)


class Faults(TinyCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        by_offset = sorted(cls.extents, key=lambda n: cls.extents[n][0])
        # the first tensor in the file is read before a fault, the last ones after it:
        # they are megabytes apart, so no fetch block holds both
        cls.early, cls.late, cls.later = by_offset[0], by_offset[-1], by_offset[-2]
        assert cls.extents[cls.later][0] - cls.extents[cls.early][1] > (1 << 20)

    def raw(self, name):
        a, b = self.extents[name]
        return self.data[a:b]

    def read_tensor(self, m, name, timeout=EIO_TIMEOUT):
        """(errno, bytes, seconds) of reading the raw tensor file whole, with O_DIRECT."""
        import os
        path = m.p("tensors", name)
        return read_bounded(path, 0, os.path.getsize(path), timeout)

    def assert_alive(self, m):
        """The daemon runs and still serves what needs no fetch."""
        self.assertIsNone(m.proc.poll(), "the daemon is alive")
        err, got, _ = read_bounded(m.p("metadata", "general.name"), 0, 4096, 10, direct=False)
        self.assertEqual((err, got), (0, b"tinyllama-test\n"))

    def assert_served(self, m, name):
        err, got, _ = self.read_tensor(m, name)
        self.assertEqual(err, 0, "reading %s: %s" % (name, errno.errorcode.get(err)))
        self.assertEqual(got, self.raw(name)[:len(got)], name)
        self.assertGreater(len(got), 0)

    # ---- a file that changes ----

    def changed(self, same_size):
        """The model with every tensor byte inverted (or one block longer)."""
        start = min(a for a, _ in self.extents.values())
        new = self.data[:start] + bytes(b ^ 0xFF for b in self.data[start:])
        return new if same_size else new + b"\0" * 4096

    def check_change(self, same_size, if_match=True):
        with FaultServer({PATH: self.data}) as s:
            s.ignore_if_match = not if_match
            with EnvMount(s.url + PATH) as m:
                self.assert_served(m, self.early)
                s.swap(PATH, self.changed(same_size))
                err, got, _ = self.read_tensor(m, self.late)
                self.assertEqual(err, errno.EIO, "a read of new bytes gave %d bytes" % len(got))
                err, _, _ = read_bounded(m.p("tensors", self.later + ".f32"), 0, 4096, EIO_TIMEOUT)
                self.assertEqual(err, errno.EIO)
                self.assert_alive(m)
                # what was served before may be served again from memory, or refused,
                # but never as bytes of the new version
                err, got, _ = self.read_tensor(m, self.early)
                if err == 0:
                    self.assertEqual(got, self.raw(self.early)[:len(got)])
                else:
                    self.assertEqual(err, errno.EIO)
                lines = [l for l in m.stderr().splitlines() if l.startswith("ggufs: ")
                         and l.endswith("data reads fail with EIO from now on")]
                self.assertEqual(len(lines), 1, "one line says the file changed: %r" % m.stderr())

    def test_requests_after_the_first_are_pinned(self):
        with FaultServer({PATH: self.data}) as s:
            etag = s.file(PATH).etag
            with EnvMount(s.url + PATH) as m:
                self.assert_served(m, self.early)
                self.assert_served(m, self.late)
            log = s.log_settled(3)
        self.assertGreaterEqual(len(log), 3)
        for r in log[1:]:
            self.assertEqual(r.headers.get("if-match"), etag, r)
            self.assertEqual(r.status, 206, r)

    def test_changed_same_size(self):
        self.check_change(same_size=True)

    def test_changed_size(self):
        self.check_change(same_size=False)

    def test_server_without_validators(self):
        """A server that sends no ETag nor Last-Modified still serves a right mount,
        and a change of size is still caught (Content-Range's total)."""
        with FaultServer({PATH: self.data}) as s:
            s.send_validators = False
            with EnvMount(s.url + PATH) as m:
                self.assert_served(m, self.early)
                s.swap(PATH, self.changed(same_size=False))
                err, got, _ = self.read_tensor(m, self.late)
                self.assertEqual(err, errno.EIO, "a read of new bytes gave %d bytes" % len(got))
                self.assert_alive(m)

    def test_changed_server_ignores_if_match(self):
        """Pinning must not rest on If-Match alone: the new ETag in a 206 is refused."""
        self.check_change(same_size=True, if_match=False)

    # ---- a server that fails, then recovers ----

    def check_fault(self, break_server, mend_server):
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH, ["-o", "timeout=2"]) as m:
                self.assert_served(m, self.early)
                break_server(s)
                err, got, elapsed = self.read_tensor(m, self.late)
                self.assertEqual(err, errno.EIO, "got %d bytes" % len(got))
                self.assertLess(elapsed, EIO_TIMEOUT)
                self.assert_alive(m)
                mend_server(s)
                # a block that just failed fails at once for 2 s (the kernel's READ again)
                time.sleep(FAILED_HOLD)
                self.assert_served(m, self.late)
                self.assert_served(m, self.early)
                print("EIO after %.1f s" % elapsed)

    def test_stall(self):
        def stall(s):
            s.stall = True

        def resume(s):
            s.stall = False
        self.check_fault(stall, resume)

    def test_503(self):
        def fail(s):
            s.fail_next(1000000, 503)
        self.check_fault(fail, FaultServer.clear_failures)

    def test_truncated_bodies(self):
        def cut(s):
            s.reset_after = 1000

        def whole(s):
            s.reset_after = None
        self.check_fault(cut, whole)

    def test_another_range_than_asked(self):
        def shift(s):
            s.shift_ranges = 4096

        def honest(s):
            s.shift_ranges = 0
        self.check_fault(shift, honest)

    def test_slow_but_progressing(self):
        """-o timeout bounds a stall, not a transfer: a block that trickles in over
        longer than the timeout, with bytes every second or so, is not abandoned."""
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH, ["-o", "timeout=2"]) as m:
                s.chunk, s.rate = 8192, 40 * 1024  # 8 KiB every 0.2 s
                big = max((t for t in self.extents if t not in (self.early, self.late)),
                          key=lambda t: self.extents[t][1] - self.extents[t][0])
                n = 160 * 1024  # 4 s at least, twice the timeout
                self.assertGreater(len(self.raw(big)), n)
                err, got, elapsed = read_bounded(m.p("tensors", big), 0, n, EIO_TIMEOUT)
                s.rate = None
                self.assertEqual(err, 0, "a slow read failed after %.1f s" % elapsed)
                self.assertEqual(got, self.raw(big)[:n])
                self.assertGreater(elapsed, 2)
                print("%d bytes at 40 KiB/s read in %.1f s" % (len(got), elapsed))

    def test_sigterm_during_stalled_read(self):
        """A daemon with a read stuck on a stalled server still ends on SIGTERM
        within seconds, and the reader gets an error instead of hanging."""
        import os
        import signal
        import subprocess
        import sys
        import time
        with FaultServer({PATH: self.data}) as s:
            m = EnvMount(s.url + PATH, ["-o", "timeout=30"]).__enter__()
            try:
                self.assert_served(m, self.early)
                s.stall = True
                path = m.p("tensors", self.late)
                reader = stalled_reader(path)
                deadline = time.monotonic() + 10
                while not any(r.method == "GET" for r in s.log()[1:]) and time.monotonic() < deadline:
                    time.sleep(0.02)  # until the read's request hangs at the server
                start = time.monotonic()
                m.proc.send_signal(signal.SIGTERM)
                try:
                    m.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    m.proc.kill()
                    self.fail("the daemon did not end within 10 s of SIGTERM")
                print("daemon ended %.1f s after SIGTERM" % (time.monotonic() - start))
                try:
                    rc = reader.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    reader.kill()
                    self.fail("the reader still hangs after the daemon ended")
                self.assertNotEqual(rc, 0, "the stalled read cannot have succeeded")
            finally:
                err = self.end_stalled(s, m)
            self.assertFalse(any(mark.decode() in err for mark in gm.SANITIZER_MARKS), err)

    # ---- transient faults: retried, and the read succeeds ----

    def check_recovers(self, inject):
        """inject(s) makes some of the next requests fail; a cold read of a whole tensor
        still gives its bytes. Returns (the requests of that read, seconds)."""
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH, ["-o", "timeout=5"]) as m:
                self.assert_served(m, self.early)
                s.log_settled(2)
                # nothing left over from that read may take the failures meant for this one
                s.quiet()
                s.clear_log()
                inject(s)
                err, got, elapsed = self.read_tensor(m, self.late)
                self.assertEqual(err, 0, "the read failed after %.1f s" % elapsed)
                self.assertEqual(got, self.raw(self.late), "the bytes, nothing else")
                self.assert_alive(m)
                log = s.log_settled(2)
        self.assertEqual(log[-1].status, 206)
        return log, elapsed

    def test_503_retried(self):
        log, elapsed = self.check_recovers(lambda s: s.fail_next(3, 503))
        self.assertEqual(sum(r.status == 503 for r in log), 3, log)
        print("3 x 503, then the bytes after %.1f s" % elapsed)

    def recovers_after_429(self, retry_after):
        """check_recovers from one 429 whose Retry-After says retry_after() (made when
        the failure is set up): the seconds the bytes took."""
        def limit(s):
            s.retry_after = retry_after()
            s.fail_next(1, 429)
        log, elapsed = self.check_recovers(limit)
        self.assertEqual(sum(r.status == 429 for r in log), 1, log)
        return elapsed

    def test_429_retry_after_capped(self):
        """A 429 saying Retry-After: 3600 is waited for 10 s, not an hour."""
        elapsed = self.recovers_after_429(lambda: "3600")
        self.assertGreaterEqual(elapsed, 9.5, "Retry-After honoured up to its cap")
        self.assertLess(elapsed, 30, "Retry-After capped at 10 s")
        print("429 with Retry-After: 3600, then the bytes after %.1f s" % elapsed)

    def test_429_retry_after_honoured(self):
        elapsed = self.recovers_after_429(lambda: "2")
        self.assertGreaterEqual(elapsed, 1.9, "the retry waited as Retry-After said")
        self.assertLess(elapsed, 9)

    def test_429_retry_after_date(self):
        """Retry-After as an HTTP date, 3 s ahead (whole seconds: 2 to 3 s from now)."""
        import email.utils
        import time

        elapsed = self.recovers_after_429(
            lambda: email.utils.formatdate(time.time() + 3, usegmt=True))
        self.assertGreaterEqual(elapsed, 1.5, "the retry waited until the date")
        self.assertLess(elapsed, 12)

    def test_resets_retried(self):
        log, elapsed = self.check_recovers(lambda s: s.reset_next(2, after=1000))
        cut = [r for r in log if r.status == 206 and r.bytes_sent == 1000]
        self.assertEqual(len(cut), 2, log)

    def test_truncated_bodies_retried(self):
        log, elapsed = self.check_recovers(lambda s: s.truncate_next(2))
        short = [r for r in log if r.status == 206 and r.bytes_sent < range_length(r.range)]
        self.assertEqual(len(short), 2, log)

    def test_unmount_during_stalled_read(self):
        """A read waits on a stalled server (the default timeout, 30 s): fusermount3 -u
        is refused while it holds the file open (busy, as for any file system), and
        fusermount3 -u -z detaches the mount, the read fails at once and the daemon
        ends within seconds, with exit status 0."""
        import os
        import subprocess
        import sys
        import time
        with FaultServer({PATH: self.data}) as s:
            m = EnvMount(s.url + PATH).__enter__()
            try:
                self.assert_served(m, self.early)
                s.stall = True
                s.clear_log()
                reader = stalled_reader(m.p("tensors", self.late))
                deadline = time.monotonic() + 10
                while s.max_in_flight == 0 and time.monotonic() < deadline:
                    time.sleep(0.02)  # until the read's request hangs at the server
                self.assertGreater(s.max_in_flight, 0, "the read reached the server")
                busy = subprocess.run(["fusermount3", "-u", m.path], stdin=subprocess.DEVNULL,
                                      capture_output=True, timeout=10)
                self.assertNotEqual(busy.returncode, 0, "a mount with an open file is busy")
                start = time.monotonic()
                r = subprocess.run(["fusermount3", "-u", "-z", m.path], stdin=subprocess.DEVNULL,
                                   capture_output=True, timeout=10)
                self.assertEqual(r.returncode, 0, r.stderr)
                try:
                    rc = reader.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    reader.kill()
                    self.fail("the stalled read still hangs 10 s after the unmount")
                self.assertEqual(rc, errno.EIO, "the stalled read fails")
                try:
                    rc = m.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.fail("the daemon did not end within 10 s of the unmount")
                print("read failed, daemon ended %.1f s after fusermount3 -u -z"
                      % (time.monotonic() - start))
                self.assertEqual(rc, 0)
            finally:
                err = self.end_stalled(s, m)
            self.assertFalse(any(mark.decode() in err for mark in gm.SANITIZER_MARKS), err)

    @staticmethod
    def end_stalled(s, m):
        """After a test of a stalled server s: the stall lifted and mount m (entered by
        hand) ended whatever state it is in, its directories removed; its stderr."""
        s.stall = False
        gm.unmount(m.path)
        if m.proc.poll() is None:
            m.proc.kill()
        m.proc.wait()
        err = m.stderr()
        m.errfile.close()
        if not gm.is_mounted(m.path):
            os.rmdir(m.path)
            os.rmdir(m.dir)
        return err

    def test_hang_up(self):
        def hang_up(s):
            s.hang_up = True

        def answer(s):
            s.hang_up = False
        self.check_fault(hang_up, answer)


if __name__ == "__main__":
    gm.main()
