#!/usr/bin/env python3
"""The shared cache tier (man/nginx-cache-tier.conf, run as shipped by
cachetier.py): nginx-light with slice 4m and proxy_cache_lock in front of the fault
server.

- Three mounts at once (two cache directories of their own, one with none) load the
  same 100 MB model's model.gguf through the tier: each gets the file's sha256, and the
  origin served each 4 MiB slice exactly once (its log: one 206 per slice, nothing
  else, the file's size in body bytes) although the mounts' parallel read-ahead asked
  for every block three times over.
- The origin's faults are still seen right through it: 503s at the origin reach the
  mounts (never cached) and are retried, the loads still right; an object changed at
  the origin is EIO, never mixed bytes, for a mount pinned to the old one once the
  tier revalidates (proxy_cache_valid, 1 s here), and a mount made after it gets the
  new object whole."""
import collections
import errno
import hashlib
import os
import shutil
import tempfile
import threading
import time
import unittest

from cachetier import SliceCache
from remote_common import EIO_TIMEOUT, EnvMount, FaultServer, gm, read_bounded

SLICE = 4 << 20
PATH = "/models/tier.gguf"


def write_model(path, size, seed):
    """A GGUF with one f32 tensor of size random bytes; returns the file's bytes."""
    import random
    raw = random.Random(seed).randbytes(size)
    gm.write_gguf(path, [("general.architecture", "llama"), ("general.name", "tier")],
                  [("w", [size // 4], 0, raw)])
    return gm.read_file(path)


def slices(size):
    """The Range of every slice the tier asks the origin for."""
    return {"bytes=%d-%d" % (i, i + SLICE - 1) for i in range(0, size, SLICE)}


class CacheTier(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ggufs-tier-test-")
        cls.data = write_model(os.path.join(cls.tmp, "tier.gguf"), 100 << 20, 1)
        cls.sha = hashlib.sha256(cls.data).hexdigest()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def origin_slices(self, s):
        """{Range: times} of the origin's 206 answers, and every status it gave."""
        log = s.log_settled()
        return (collections.Counter(r.range for r in log if r.status == 206),
                [r.status for r in log], sum(r.bytes_sent for r in log))

    def test_three_mounts_one_origin_fetch_per_slice(self):
        dirs = [tempfile.mkdtemp(dir=self.tmp) for _ in range(2)]
        with FaultServer({PATH: self.data}) as s, SliceCache(s.url) as tier:
            url = tier.url + PATH
            opts = [["-o", "cache_dir=" + dirs[0]], ["-o", "cache_dir=" + dirs[1]], []]
            mounts = [EnvMount(url, o) for o in opts]
            for m in mounts:
                m.__enter__()
            try:
                got = [None] * 3

                def run(i):
                    got[i] = gm.sha256_file(mounts[i].p("model.gguf"))
                threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
                gm.run_threads(threads, 300)
                self.assertEqual(got, [self.sha] * 3)
                # a request's bytes are counted when it ends, which can be just after a
                # reader waiting on it got its last bytes: wait (bounded) for the count
                deadline = time.monotonic() + 10
                while True:
                    asked = sum(int(os.getxattr(m.path, "user.ggufs.bytes_fetched"))
                                for m in mounts)
                    if asked >= 3 * len(self.data) or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
            finally:
                for m in mounts:
                    m.__exit__(None, None, None)
            s.quiet()
            counts, statuses, sent = self.origin_slices(s)
        self.assertEqual(set(counts), slices(len(self.data)))
        self.assertEqual(set(counts.values()), {1}, "each slice once: %r" % counts)
        self.assertEqual(set(statuses), {206})
        self.assertEqual(sent, len(self.data))
        self.assertGreaterEqual(asked, 3 * len(self.data), "the mounts fetched it thrice")
        for d in dirs:
            self.assertTrue(os.listdir(d), "the disk cache was filled")

    def test_origin_faults_seen_through_the_tier(self):
        small = write_model(os.path.join(self.tmp, "small.gguf"), 20 << 20, 2)
        new = small[:1 << 20] + bytes(b ^ 0xFF for b in small[1 << 20:])
        with FaultServer({PATH: small}) as s, SliceCache(s.url, valid="1s") as tier:
            url = tier.url + PATH
            # 503s at the origin: passed on, not cached, retried by the mount
            with EnvMount(url) as m:
                s.fail_next(3, 503)
                self.assertEqual(gm.sha256_file(m.p("model.gguf")), hashlib.sha256(small).hexdigest())
                self.assertGreaterEqual(int(os.getxattr(m.path, "user.ggufs.retries")), 1)
            counts, statuses, _ = self.origin_slices(s)
            self.assertEqual(set(counts.values()), {1})
            self.assertIn(503, statuses)
            # changed at the origin: a mount of the old object reads EIO once the tier
            # revalidates (no read-ahead and a small memory cache: each block is fetched
            # when read). nginx counts proxy_cache_valid in whole seconds of its cached
            # clock, so "1s" keeps a slice fresh for up to 2 s after it was stored: until
            # then a read gets the old object's bytes (right for this mount), never the
            # new one's; each try reads a block of its own, so no cache of ggufs answers
            with EnvMount(url, ["-o", "cache_size=1M"]) as m:
                err, got, _ = read_bounded(m.p("model.gguf"), 0, 4096, EIO_TIMEOUT)
                self.assertEqual((err, got), (0, small[:4096]))
                s.swap(PATH, new)
                swapped = time.monotonic()
                block = 128 << 10
                tries = []
                for at in range(len(small) - (3 << 20), len(small) - block, block):
                    err, got, _ = read_bounded(m.p("model.gguf"), at, 65536, EIO_TIMEOUT)
                    tries.append((round(time.monotonic() - swapped, 2), err, len(got)))
                    if err:
                        break
                    self.assertEqual(got, small[at:at + 65536], "the old object's bytes")
                    time.sleep(0.25)
                self.assertEqual(err, errno.EIO, "reads after the change: %r" % tries)
                self.assertIn("changed on the server", m.stderr())
            # a mount after the change gets the new object, every slice of it (once the
            # slice mount 2 read before the change is stale too)
            time.sleep(max(0.0, swapped + 3 - time.monotonic()))
            with EnvMount(url) as m:
                self.assertEqual(gm.sha256_file(m.p("model.gguf")), hashlib.sha256(new).hexdigest())

if __name__ == "__main__":
    gm.main()
