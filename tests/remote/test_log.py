#!/usr/bin/env python3
"""The event log (-o log=FILE; syslog in the background, stderr with -f) and the live
counters of a mount's root (user.ggufs.*):
- a file that changed on the server: one line naming the URL as the user gave it
  (hf://...) with the validators mounted and seen, one line for the first EIO it
  caused, and a storm of failing reads after it only counted (one summary line at
  unmount);
- a fetch that fails after its retries: one line with the status, the attempts and the
  time spent, one for the first EIO;
- the disk cache at its bound: one line that it trims; too small for an entry: a
  warning at mount that the file is read without it; a block damaged on disk: one
  warning, and the right bytes;
- the log file is made 0600 and appended to; a clean mount logs nothing;
- the counters: requests, bytes fetched, memory- and disk-cache hits, retries, EIO
  replies, the last error with its time, and the URL as given, each as it happens."""
import errno
import os
import re
import shutil
import time
import unittest

from remote_common import (TinyCase, EIO_TIMEOUT, FAILED_HOLD, TINY, EnvMount, FaultServer,
                           env_without_token, gm, read_bounded)

PATH = "/o/r/resolve/main/tinyllama-q4km.gguf"
HF = "hf://o/r/tinyllama-q4km.gguf"
LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ggufs\[\d+\]: (\S+): (.*)$")


def counters(path):
    """{name: value} of the user.ggufs.* attributes of path."""
    return {n: os.getxattr(path, n).decode() for n in os.listxattr(path)
            if n.startswith("user.ggufs.")}


class Log(TinyCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.by_offset = sorted(cls.extents, key=lambda n: cls.extents[n][0])

    def setUp(self):
        self.tmp = gm.public_tmpdir()
        self.log = os.path.join(self.tmp, "ggufs.log")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def lines(self, mountpoint):
        """The log's lines, each checked to carry the time, the pid and mountpoint;
        [message]."""
        if not os.path.exists(self.log):
            return []
        out = []
        with open(self.log) as f:
            text = f.read()
        for line in text.splitlines():
            m = LINE.match(line)
            self.assertIsNotNone(m, line)
            self.assertEqual(m.group(1), mountpoint, line)
            out.append(m.group(2))
        return out

    def read(self, m, name, direct=True):
        path = m.p("tensors", name)
        return read_bounded(path, 0, os.path.getsize(path), EIO_TIMEOUT, direct=direct)

    def test_changed_file(self):
        with FaultServer({PATH: self.data}) as s:
            env = env_without_token(HF_ENDPOINT=s.url)
            old_etag = s.file(PATH).etag
            with EnvMount(HF, ["-o", "log=" + self.log], env) as m:
                self.assertEqual(self.read(m, self.by_offset[0])[0], 0)
                self.assertEqual(self.lines(m.path), [], "nothing to say yet")
                s.swap(PATH, bytes(b ^ 0xFF for b in self.data))
                new_etag = s.file(PATH).etag
                for name in self.by_offset[-6:]:   # a storm of failing reads
                    self.assertEqual(self.read(m, name)[0], errno.EIO)
                got = self.lines(m.path)
                self.assertEqual(len(got), 2, got)
                self.assertTrue(got[0].startswith(HF + ": changed on the server"), got[0])
                self.assertIn(old_etag, got[0])
                self.assertIn(new_etag, got[0])
                self.assertNotIn("resolve", got[0], "the URL as given, not the one fetched")
                self.assertTrue(got[1].startswith("EIO to a read of tensors/"), got[1])
                self.assertIn("because " + HF + ": changed on the server", got[1])
                c = counters(m.path)
                self.assertEqual(c["user.ggufs.url"], HF)
                self.assertEqual(int(c["user.ggufs.eio_replies"]), 6)
                self.assertRegex(c["user.ggufs.last_error"],
                                 r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ " + re.escape(HF) +
                                 ": changed on the server")
                self.assertEqual(m.stderr(), "", "-o log=FILE: nothing on stderr")
            got = self.lines(m.path)
            self.assertEqual(len(got), 3, got)
            self.assertRegex(got[2], r"^EIO to a read of .*\(again 5 times in \d+ s\)$")

    def test_fetch_fails_after_retries(self):
        with FaultServer({PATH: self.data}) as s:
            url = s.url + PATH
            with EnvMount(url, ["-o", "log=" + self.log + ",timeout=2"]) as m:
                s.fail_next(1000, 503)
                for name in self.by_offset[-3:]:
                    self.assertEqual(self.read(m, name)[0], errno.EIO)
                s.clear_failures()
                got = self.lines(m.path)
                self.assertEqual(len(got), 2, got)
                self.assertRegex(got[0], r"^%s: bytes \d+-\d+ could not be fetched after 5 "
                                 r"attempts in [\d.]+ s: HTTP 503: reads of them fail with EIO$"
                                 % re.escape(url))
                self.assertRegex(got[1], r"^EIO to a read of tensors/\S+ \(\d+ bytes at 0\), "
                                 r"because %s: HTTP 503$" % re.escape(url))
                c = counters(m.path)
                self.assertGreaterEqual(int(c["user.ggufs.retries"]), 4)
                self.assertEqual(int(c["user.ggufs.eio_replies"]), 3)
                self.assertIn(url + ": HTTP 503", c["user.ggufs.last_error"])
                # and once the server is back and the failed block's hold is over, the
                # read succeeds, and is not logged
                time.sleep(FAILED_HOLD)
                self.assertEqual(self.read(m, self.by_offset[-1])[0], 0)
            self.assertEqual(len(self.lines(m.path)), 4)   # two summaries at unmount

    def test_counters(self):
        """Each counter moves when what it counts happens; a local mount shows the
        ones that apply to it."""
        with FaultServer({PATH: self.data}) as s:
            url = s.url + PATH
            cache = os.path.join(self.tmp, "cache")
            with EnvMount(url, ["-o", "log=%s,cache_dir=%s" % (self.log, cache)]) as m:
                c0 = counters(m.path)
                self.assertEqual(sorted(c0), sorted(
                    "user.ggufs." + n for n in ("reads", "eio_replies", "last_error", "url",
                                                "requests", "bytes_fetched",
                                                "memory_cache_hits", "disk_cache_hits",
                                                "retries")))
                self.assertEqual(c0["user.ggufs.url"], url)
                self.assertEqual(c0["user.ggufs.last_error"], "")
                self.assertGreaterEqual(int(c0["user.ggufs.requests"]), 1)   # the header
                name = self.by_offset[-1]
                self.assertEqual(self.read(m, name)[0], 0)
                c1 = counters(m.path)
                self.assertGreater(int(c1["user.ggufs.requests"]), int(c0["user.ggufs.requests"]))
                self.assertGreaterEqual(int(c1["user.ggufs.bytes_fetched"]) -
                                        int(c0["user.ggufs.bytes_fetched"]),
                                        os.path.getsize(m.p("tensors", name)))
                self.assertGreater(int(c1["user.ggufs.reads"]), int(c0["user.ggufs.reads"]))
                self.assertEqual(self.read(m, name)[0], 0)   # again: from memory
                c2 = counters(m.path)
                self.assertGreater(int(c2["user.ggufs.memory_cache_hits"]),
                                   int(c1["user.ggufs.memory_cache_hits"]))
                self.assertEqual(c2["user.ggufs.requests"], c1["user.ggufs.requests"])
                s.fail_next(2, 503)   # a tensor megabytes away from those read
                self.assertEqual(self.read(m, self.by_offset[len(self.by_offset) // 2])[0], 0)
                self.assertEqual(int(counters(m.path)["user.ggufs.retries"]), 2)
            # a second mount of the same version reads that tensor from the disk cache
            with EnvMount(url, ["-o", "log=%s,cache_dir=%s" % (self.log, cache)]) as m:
                self.assertEqual(self.read(m, name)[0], 0)
                self.assertGreater(int(counters(m.path)["user.ggufs.disk_cache_hits"]), 0)
        self.assertEqual(self.lines(m.path), [], "nothing went wrong: nothing logged")
        self.assertEqual(os.stat(self.log).st_mode & 0o777, 0o600)
        # a local mount: the counters that apply to it
        with gm.Mount(TINY) as m:
            c = counters(m.path)
            self.assertEqual(sorted(c), ["user.ggufs.eio_replies", "user.ggufs.last_error",
                                         "user.ggufs.reads"])
            gm.read_file(m.p("gguf.json"))
            self.assertGreater(int(counters(m.path)["user.ggufs.reads"]), 0)
            # nothing else changed: the tree's files have no such attributes
            self.assertEqual([n for n in os.listxattr(m.p("gguf.json"))
                              if n.startswith("user.ggufs.")], [])

    def test_disk_cache_trimmed(self):
        """A cache_max smaller than what is read: one line that the disk cache trims,
        however many blocks it trims."""
        with FaultServer({PATH: self.data}) as s:
            cache = os.path.join(self.tmp, "cache")
            with EnvMount(s.url + PATH, ["-o", "log=%s,cache_dir=%s,cache_max=1M"
                                         % (self.log, cache)]) as m:
                for name in self.by_offset:   # 3.7 MB of tensors
                    self.assertEqual(self.read(m, name)[0], 0)
                got = self.lines(m.path)
                trims = [l for l in got if "disk cache is at its bound" in l]
                self.assertEqual(len(trims), 1, got)
                self.assertTrue(trims[0].startswith("warning: "), trims[0])

    def test_disk_cache_refused(self):
        """A cache_max too small for an entry: the mount says, as a warning on stderr
        (it is made at mount), that it reads without the disk cache, and works."""
        with FaultServer({PATH: self.data}) as s:
            cache = os.path.join(self.tmp, "cache")
            with EnvMount(s.url + PATH, ["-o", "cache_dir=%s,cache_max=4K" % cache]) as m:
                self.assertEqual(self.read(m, self.by_offset[-1])[0], 0)
                self.assertEqual(m.stderr(), "ggufs: warning: %s%s: the disk cache refused an "
                                 "entry for this file (no room under cache_max, a URL too "
                                 "long, a write error, or an older ggufs holding it): it is "
                                 "read without the disk cache\n" % (s.url, PATH))

    def test_encoded_reply_logged(self):
        """A read refused because the server sent an encoded (gzip) body: one line with
        that cause, as at mount, and the first EIO it caused."""
        with FaultServer({PATH: self.data}) as s:
            url = s.url + PATH
            cache = os.path.join(self.tmp, "cache")
            with EnvMount(url, ["-o", "log=%s,cache_dir=%s" % (self.log, cache)]) as m:
                s.content_encoding = "gzip"
                for name in self.by_offset[-3:]:
                    self.assertEqual(self.read(m, name, direct=False)[0], errno.EIO)
                s.content_encoding = None
                got = self.lines(m.path)
                self.assertEqual(len(got), 2, got)
                self.assertRegex(got[0], r"^%s: bytes \d+-\d+ could not be fetched after 1 "
                                 r"attempt in [\d.]+ s: the server's reply is encoded "
                                 r"\(Content-Encoding: gzip\), not the file's bytes: reads of "
                                 r"them fail with EIO$" % re.escape(url))
                self.assertTrue(got[1].startswith("EIO to a read of tensors/"), got[1])
                self.assertIn("Content-Encoding: gzip", got[1])

    def test_mount_warning_to_the_log(self):
        """With -o log=FILE the same warning, raised while the mount is made, goes to
        FILE with the others, not to stderr."""
        with FaultServer({PATH: self.data}) as s:
            cache = os.path.join(self.tmp, "cache")
            with EnvMount(s.url + PATH, ["-o", "log=%s,cache_dir=%s,cache_max=4K"
                                         % (self.log, cache)]) as m:
                self.assertEqual(self.read(m, self.by_offset[-1])[0], 0)
                self.assertEqual(m.stderr(), "")
                self.assertEqual(self.lines(m.path), [
                    "warning: %s%s: the disk cache refused an entry for this file (no room "
                    "under cache_max, a URL too long, a write error, or an older ggufs "
                    "holding it): it is read without the disk cache" % (s.url, PATH)])

    def test_disk_cache_damaged(self):
        """A block whose bytes on disk no longer match their checksum: one warning that
        the disk cache held a damaged block, and the right bytes all the same."""
        import glob
        with FaultServer({PATH: self.data}) as s:
            cache = os.path.join(self.tmp, "cache")
            opts = ["-o", "log=%s,cache_dir=%s" % (self.log, cache)]
            name = self.by_offset[-1]
            start, end = self.extents[name]
            with EnvMount(s.url + PATH, opts) as m:
                self.assertEqual(self.read(m, name)[0], 0)
            data, = glob.glob(os.path.join(cache, "*", "data"))
            with open(data, "r+b") as f:   # one byte of the tensor, flipped on disk
                f.seek(start)
                b = f.read(1)
                f.seek(start)
                f.write(bytes([b[0] ^ 0xFF]))
            with EnvMount(s.url + PATH, opts) as m:
                err, got, _ = self.read(m, name)
                self.assertEqual((err, got), (0, self.data[start:end]))
                got = self.lines(m.path)
                self.assertEqual(got, ["warning: the disk cache held a damaged block (its "
                                       "bytes do not match their checksum): it is dropped "
                                       "and fetched again"])

    def test_appended(self):
        """The log is appended to, never truncated: two mounts' lines follow each other."""
        with open(self.log, "w") as f:
            f.write("2026-01-01T00:00:00Z ggufs[1]: /elsewhere: an older line\n")
        with FaultServer({PATH: self.data}) as s:
            for _ in range(2):
                with EnvMount(s.url + PATH, ["-o", "log=" + self.log + ",timeout=1"]) as m:
                    s.fail_next(1000, 503)
                    self.assertEqual(self.read(m, self.by_offset[-1])[0], errno.EIO)
                    s.clear_failures()
        with open(self.log) as f:
            text = f.read().splitlines()
        self.assertEqual(text[0], "2026-01-01T00:00:00Z ggufs[1]: /elsewhere: an older line")
        self.assertEqual(sum("could not be fetched" in l for l in text), 2, text)


if __name__ == "__main__":
    gm.main()
