#!/usr/bin/env python3
"""Counting what a remote mount asks for, in nginx's access log: mounting the bundled
model is one range GET and nothing else (walking and stat-ing the tree adds nothing);
a 4 KiB read of a .f32 at a random offset fetches at most 256 KiB; a header larger than
the first request (a 150k-vocabulary model, about 6 MB) takes at most 3 requests,
which grow (all but the last, which may ask only for what is missing), and fetch not
much more than the header."""
import os
import random
import shutil
import unittest

from remote_common import (TINY, EnvMount, Nginx, gm, install, public_root, range_length,
                           tensor_extents, write_big_vocab)

MAX_FETCH_FOR_4K = 256 * 1024


class Requests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = public_root()
        cls.tiny = install(TINY, cls.root, "tinyllama-q4km.gguf")
        cls.big = os.path.join(cls.root, "big-vocab.gguf")
        cls.big_header = write_big_vocab(cls.big)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)

    def test_mount_is_one_get(self):
        with Nginx(self.root) as n:
            with EnvMount(n.url + "/tinyllama-q4km.gguf") as m:
                for dirpath, dirnames, filenames in os.walk(m.path):
                    for name in filenames:
                        os.stat(os.path.join(dirpath, name))
                        os.listxattr(os.path.join(dirpath, name))
                with open(m.p("metadata", "general.name"), "rb") as f:
                    self.assertEqual(f.read(), b"tinyllama-test\n")
                recs = n.records_settled(1)
                self.assertEqual(len(recs), 1, "mounting, walking the tree and reading "
                                 "metadata: one request, got %r" % recs)
                r = recs[0]
                self.assertEqual((r.method, r.status, r.path), ("GET", 206, "/tinyllama-q4km.gguf"))
                self.assertTrue(r.range.startswith("bytes=0-"), r.range)
                print("mount of tinyllama: 1 GET, %s, %d bytes sent" % (r.range, r.bytes_sent))

    def test_random_f32_read_fetches_one_block(self):
        extents = tensor_extents(self.tiny)
        start, end = extents["output.weight"]  # q6_K, 256 x 8000: an 8 MB .f32
        rnd = random.Random(os.environ.get("GGUFS_TEST_SEED", "remote-f32"))
        f32_size = 256 * 8000 * 4
        raw_per_f32 = (end - start) / f32_size  # 210 bytes of q6_K per 256 floats, about
        with Nginx(self.root) as n:
            with EnvMount(n.url + "/tinyllama-q4km.gguf") as m, gm.Mount(self.tiny) as local:
                path = m.p("tensors", "output.weight.f32")
                self.assertEqual(os.path.getsize(path), f32_size)
                n.records_settled(1)
                for attempt in range(100):  # an offset whose raw bytes lie in one 256 KiB
                    off = rnd.randrange(0, f32_size - 4096) & ~4095
                    a = start + int(off * raw_per_f32)
                    if a // MAX_FETCH_FOR_4K == (a + 2048) // MAX_FETCH_FOR_4K:
                        break
                n.clear_log()
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                    got = os.pread(fd, 4096, off)
                finally:
                    os.close(fd)
                with open(local.p("tensors", "output.weight.f32"), "rb") as f:
                    f.seek(off)
                    self.assertEqual(got, f.read(4096), "the bytes at %d" % off)
                recs = n.records_settled(1)
                self.assertGreaterEqual(len(recs), 1)
                self.assertTrue(all(r.status == 206 for r in recs), recs)
                fetched = sum(range_length(r.range) for r in recs)
                self.assertLessEqual(fetched, MAX_FETCH_FOR_4K,
                                     "a 4 KiB read at %d fetched %d bytes: %r" % (off, fetched, recs))
                print("4 KiB .f32 read at %d: %d request(s), %d bytes asked, %d sent"
                      % (off, len(recs), fetched, sum(r.bytes_sent for r in recs)))

    def test_big_header_few_requests(self):
        with Nginx(self.root) as n:
            with EnvMount(n.url + "/big-vocab.gguf") as m:
                self.assertEqual(os.path.getsize(m.p("metadata", "tokenizer.ggml.tokens")) > 0, True)
                recs = n.records_settled(1)
        self.assertTrue(all(r.method == "GET" and r.status == 206 for r in recs), recs)
        lengths = [range_length(r.range, os.path.getsize(self.big)) for r in recs]
        first = lengths[0]
        self.assertLessEqual(len(recs), 3, "a %d-byte header in %r" % (self.big_header, recs))
        if self.big_header > first:
            self.assertGreaterEqual(len(recs), 2)
            # they grow, but the last may ask only for what is still missing
            self.assertTrue(all(b > a for a, b in zip(lengths[:-2], lengths[1:-1])),
                            "requests grow: %r" % lengths)
        covered = 0
        for r in recs:  # together the ranges cover the header, without re-fetching much
            a = int(r.range[len("bytes="):].split("-")[0])
            self.assertLessEqual(a, covered, "no gap before %r" % r.range)
            covered = max(covered, a + range_length(r.range, os.path.getsize(self.big)))
        self.assertGreaterEqual(covered, self.big_header)
        self.assertLessEqual(sum(lengths), 4 * self.big_header + (1 << 20))
        print("mount of a %d-byte header (151936 tokens): %d GETs of %r bytes"
              % (self.big_header, len(recs), lengths))


if __name__ == "__main__":
    gm.main()
