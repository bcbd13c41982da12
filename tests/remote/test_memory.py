#!/usr/bin/env python3
"""The memory cache is bounded: a model with 160 MB of tensor data, read whole through
a remote mount with -o cache_size=16M, keeps the daemon's RssAnon at or under
cache_size + 64 MB all along, and every byte equals a local mount's (including a
re-read of what must have been evicted). Under AddressSanitizer, whose shadow memory
and quarantine are anonymous memory too, the bound is not asserted (the bytes are)."""
import hashlib
import os
import shutil
import unittest

from remote_common import EnvMount, Nginx, gm, public_root, write_noise_model

N_TENSORS = 4
TENSOR_FLOATS = 10 * (1 << 20)  # 40 MB each
CACHE = 16 << 20
SLACK = 64 << 20
CHUNK = 1 << 20


def has_asan(pid):
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


class Memory(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = public_root()
        cls.model = os.path.join(cls.root, "big.gguf")
        write_noise_model(cls.model, [("w.%d" % i, [1 << 20, 10]) for i in range(N_TENSORS)], 10)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)

    def digest(self, path, pid=None, peak=None):
        """sha256 of the file read in 1 MiB pieces, sampling pid's RssAnon into peak."""
        h = hashlib.sha256()
        with open(path, "rb") as f:
            n = 0
            while True:
                b = f.read(CHUNK)
                if not b:
                    break
                h.update(b)
                n += 1
                if pid and n % 8 == 0:
                    peak[0] = max(peak[0], gm.rss_anon(pid))
        return h.hexdigest()

    def test_cache_bound(self):
        with Nginx(self.root) as n:
            with EnvMount(n.url + "/big.gguf", ["-o", "cache_size=16M"]) as m, \
                    gm.Mount(self.model) as local:
                pid = m.proc.pid
                peak = [gm.rss_anon(pid)]
                for i in range(N_TENSORS):
                    for suffix in ("", ".f32"):
                        name = "w.%d%s" % (i, suffix)
                        self.assertEqual(self.digest(m.p("tensors", name), pid, peak),
                                         self.digest(local.p("tensors", name)), name)
                # the first tensor again: long evicted, fetched again, still right
                self.assertEqual(self.digest(m.p("tensors", "w.0.npy"), pid, peak),
                                 self.digest(local.p("tensors", "w.0.npy")))
                asan = has_asan(pid)
            fetched = sum(r.bytes_sent for r in n.records_settled(1))
        print("read %d MB of tensor data (%d MB fetched) with cache_size=16M: "
              "peak RssAnon %.1f MB%s" % (N_TENSORS * TENSOR_FLOATS * 4 >> 20, fetched >> 20,
                                          peak[0] / 1e6, " (ASan: not asserted)" if asan else ""))
        self.assertGreaterEqual(fetched, N_TENSORS * TENSOR_FLOATS * 4)
        if not asan:
            self.assertLessEqual(peak[0], CACHE + SLACK)


if __name__ == "__main__":
    gm.main()
