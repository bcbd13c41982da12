#!/usr/bin/env python3
"""model.gguf of a remote mount (issue 18):
- served by nginx, the bundled model's model.gguf is the file (sha256), also through
  hf:// with HF_ENDPOINT; the bundled model and the type vectors, single and split,
  parse back with ggufs itself into the remote tree's keys, values, tensors and bytes;
  a split model mounted by URL merges back into the original byte for byte;
- an edits file made on a local mount applies to the model by URL, whole and split
  (issue 19);
- on the fault server, a whole read of model.gguf while it answers 503s and resets
  connections mid-body equals the file;
- a sequential reader of model.gguf gets the read-ahead: requests grow past the
  reader's own and several are in flight at once;
- the file changes on the server: a read of model.gguf bytes not yet fetched gives EIO,
  never bytes of the new version; the server stalls (-o timeout=2): EIO within the
  documented bound (4 x timeout), and the right bytes once it answers again."""
import errno
import hashlib
import os
import random
import shutil
import time
import unittest

from remote_common import (EIO_TIMEOUT, ALLTYPES, FAILED_HOLD, TINY, EnvMount, FaultServer,
                           Nginx, env_without_token, gm, install, public_root, range_length,
                           read_bounded, read_sequentially, served_root, split_gguf)
from modelfile_check import parses_back

PATH = "/models/tinyllama-q4km.gguf"
MIB = 1 << 20


def digest(b):
    return hashlib.sha256(b).hexdigest()


class Served(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = served_root()[0]
        install(ALLTYPES, cls.root, "vectors/alltypes.gguf")
        split_gguf(ALLTYPES, os.path.join(cls.root, "split"), "alltypes", 4)
        cls.nginx = Nginx(cls.root).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.nginx.__exit__(None, None, None)
        shutil.rmtree(cls.root)

    def test_tinyllama(self):
        with EnvMount(self.nginx.url + PATH) as m:
            self.assertEqual(gm.sha256_file(m.p("model.gguf")), gm.sha256_file(TINY))
            self.assertEqual(os.path.getsize(m.p("model.gguf")), os.path.getsize(TINY))
            self.assertEqual(int(os.stat(m.p("model.gguf")).st_mtime), int(os.stat(TINY).st_mtime))
            parses_back(self, m.path)
            self.assertEqual(m.stderr(), "")

    def test_hf(self):
        env = env_without_token(HF_ENDPOINT=self.nginx.url)
        with EnvMount("hf://owner/repo/tinyllama-q4km.gguf", env=env) as m:
            self.assertEqual(gm.sha256_file(m.p("model.gguf")), gm.sha256_file(TINY))

    def test_alltypes(self):
        with EnvMount(self.nginx.url + "/vectors/alltypes.gguf") as m:
            self.assertEqual(gm.read_file(m.p("model.gguf")), gm.read_file(ALLTYPES))
            parses_back(self, m.path)

    def test_split_merges_back(self):
        with EnvMount(self.nginx.url + "/split/tiny-00002-of-00003.gguf") as m:
            self.assertEqual(gm.sha256_file(m.p("model.gguf")), gm.sha256_file(TINY))
            parses_back(self, m.path)

    def test_edits_local_then_remote(self):
        """Issue 19: an edits file made on a local mount applies to the same model served
        by URL, whole and split: its merged model.gguf parses back with the edit."""
        d = public_root()
        try:
            fix = os.path.join(d, "fix.json")
            with gm.Mount(TINY, ["-o", "edits=" + fix]) as m:
                with open(m.p("metadata", "general.name"), "w") as f:
                    f.write("fixed remotely\n")
            for url in (self.nginx.url + PATH, self.nginx.url + "/split/tiny-00002-of-00003.gguf"):
                with EnvMount(url, ["-o", "edits=" + fix]) as m:
                    self.assertEqual(gm.read_file(m.p("metadata", "general.name")),
                                     b"fixed remotely\n")
                    doc, _ = parses_back(self, m.path)
                    self.assertEqual(doc["metadata"]["general.name"]["value"], "fixed remotely")
        finally:
            shutil.rmtree(d)

    def test_split_alltypes(self):
        with EnvMount(self.nginx.url + "/split/alltypes-00001-of-00004.gguf") as m:
            parses_back(self, m.path)


class Faults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = gm.read_file(TINY)

    def test_503s_and_resets(self):
        with FaultServer({PATH: self.data}) as s, EnvMount(s.url + PATH) as m:
            s.fail_next(3, 503)
            s.reset_next(3, after=10000)
            err, got, _ = read_bounded(m.p("model.gguf"), 0, len(self.data), EIO_TIMEOUT,
                                       direct=False)
            self.assertEqual(err, 0)
            self.assertEqual(digest(got), digest(self.data))
            statuses = [r.status for r in s.log()]
            self.assertIn(503, statuses, "the faults were met")

    def test_read_ahead(self):
        with FaultServer({PATH: self.data}) as s, EnvMount(s.url + PATH) as m:
            s.latency = 0.02
            s.clear_log()
            got = read_sequentially(m.p("model.gguf"))
            self.assertEqual(digest(got), digest(self.data))
            lengths = [range_length(r.range) for r in s.log_settled(1) if r.range]
            self.assertGreater(max(lengths), 128 << 10, "requests grow past the reader's: %r"
                               % lengths)
            self.assertGreaterEqual(s.max_in_flight, 2, "read-ahead requests in flight at once")
            self.assertLess(sum(lengths), 2 * len(self.data), "bytes fetched about once")

    def test_read_ahead_across_shards(self):
        """A sequential reader of a split model's model.gguf is one reader for the
        fetcher: where it runs from shard 1 into shard 2, shard 2's read-ahead goes on at
        the pace it had reached (requests of MiBs) instead of starting again at 256 KiB."""
        d = public_root()
        try:
            src = os.path.join(d, "big.gguf")
            rng = random.Random(3)
            tensors = [("w%d" % i, [MIB], gm.GGML_F32, rng.randbytes(4 * MIB)) for i in range(4)]
            gm.write_gguf(src, [("general.architecture", "test")], tensors)
            shards = split_gguf(src, d, "big", 2)
            files = {"/" + os.path.basename(p): gm.read_file(p) for p in shards}
            with FaultServer(files) as s, \
                    EnvMount(s.url + "/" + os.path.basename(shards[0])) as m:
                s.latency = 0.02
                s.clear_log()
                got = read_sequentially(m.p("model.gguf"))
                self.assertEqual(digest(got), digest(gm.read_file(src)))
                second = [range_length(r.range) for r in s.log_settled(1)
                          if r.range and r.path.endswith(os.path.basename(shards[1]))]
            self.assertTrue(second, "shard 2's data was fetched")
            self.assertGreater(second[0], MIB, "shard 2's requests: %r" % second)
        finally:
            shutil.rmtree(d)

    def test_changed(self):
        with FaultServer({PATH: self.data}) as s, EnvMount(s.url + PATH) as m:
            first = read_bounded(m.p("model.gguf"), 0, MIB, EIO_TIMEOUT)
            self.assertEqual(first[:2], (0, self.data[:MIB]))
            new = self.data[:MIB] + bytes(b ^ 0xFF for b in self.data[MIB:])
            s.swap(PATH, new)
            err, got, _ = read_bounded(m.p("model.gguf"), len(self.data) - MIB, MIB, EIO_TIMEOUT)
            self.assertEqual(err, errno.EIO, "a read of new bytes gave %d bytes" % len(got))
            # whatever is served again is the old version's
            err, got, _ = read_bounded(m.p("model.gguf"), 0, MIB, EIO_TIMEOUT)
            if err == 0:
                self.assertEqual(got, self.data[:len(got)])
            else:
                self.assertEqual(err, errno.EIO)
            self.assertIsNone(m.proc.poll(), "the daemon lives")

    def test_stall(self):
        with FaultServer({PATH: self.data}) as s, \
                EnvMount(s.url + PATH, ["-o", "timeout=2"]) as m:
            s.stall = True
            end = len(self.data) - MIB
            err, got, elapsed = read_bounded(m.p("model.gguf"), end, MIB, EIO_TIMEOUT)
            self.assertEqual(err, errno.EIO, "got %d bytes" % len(got))
            # the man page's bound: (REMOTE_RETRY_SPAN + 1) x timeout = 8 s, and a
            # reader process's start and a loaded machine's slack
            self.assertLess(elapsed, 4 * 2 + 4)
            s.stall = False
            time.sleep(FAILED_HOLD)   # a block that just failed fails at once meanwhile
            err, got, _ = read_bounded(m.p("model.gguf"), end, MIB, EIO_TIMEOUT)
            self.assertEqual((err, got), (0, self.data[end:]))
            print("EIO after %.1f s" % elapsed)


if __name__ == "__main__":
    gm.main()
