#!/usr/bin/env python3
"""The read-ahead's shape, from the fault server's log, with 20 ms added per request:
- a sequential reader's requests grow from 256 KiB to 4 MiB and no further, several
  are in flight at once (more than the reader's own), no byte is fetched twice (what
  read-ahead fetched is not pushed out of the cache before it is read), and every byte
  is right;
- a read elsewhere (past the window, at most 16 MiB with -o cache_size=32M) starts
  again small: the requests that follow a seek are no larger than the reader's 1 MiB
  reads (4 MiB before it);
- with -o cache_size=4M the window is half the cache, so no request asks for more than
  1 MiB, and the bytes are still right;
- numpy's mmap (np.load(mmap_mode='r') and np.memmap) of one row's first values
  fetches at most 4x what a 16 KiB pread of the same place does: the kernel's window
  around a page fault is its read-ahead, which ggufs leaves at 128 KiB on a remote
  mount (at 4 MiB one row fetched 5-11 MB)."""
import os
import shutil
import tempfile
import time
import unittest

import numpy

from remote_common import (EnvMount, FaultServer, Nginx, gm, public_root, range_length,
                           write_noise_model)

MIB = 1 << 20
PIECE = MIB


class ReadAhead(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ggufs-readahead-")
        cls.model = os.path.join(cls.dir, "m.gguf")
        cls.raw = write_noise_model(cls.model, [("w", [MIB, 16])], 13)[0]  # 64 MiB

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def read_run(self, m, start, n_pieces):
        """n_pieces O_DIRECT reads of PIECE bytes from start of the raw tensor, checked."""
        path = m.p("tensors", "w")
        for i in range(n_pieces):
            off = start + i * PIECE
            got = gm.pread_direct(path, PIECE, off)
            self.assertEqual(got, self.raw[off:off + PIECE], "bytes at %d" % off)

    def lengths(self, s):
        """The lengths asked for by the data requests logged so far, in order."""
        return [range_length(r.range) for r in s.log() if r.range]

    def sequential(self, s, m, n_pieces):
        """The lengths of the data requests that n_pieces read in order from the start
        make, at 20 ms per request: so that read-ahead requests are in flight together
        however busy the machine (without it, a loaded CI run once had each answered
        before the next was sent)."""
        s.latency = 0.02
        s.clear_log()
        self.read_run(m, 0, n_pieces)
        s.log_settled(1)
        return self.lengths(s)

    def test_grows_then_resets(self):
        with FaultServer({"/m.gguf": gm.read_file(self.model)}) as s, \
                EnvMount(s.url + "/m.gguf", ["-o", "cache_size=32M"]) as m:
            grown = self.sequential(s, m, 24)
            in_flight = s.max_in_flight
            self.assertLessEqual(max(grown), 4 * MIB, grown)
            self.assertEqual(max(grown), 4 * MIB, "requests grow to 4 MiB: %r" % grown)
            self.assertLessEqual(min(grown[:3]), 512 << 10, "they start small: %r" % grown)
            self.assertGreaterEqual(in_flight, 3, "read-ahead requests in flight at once")
            spans = sorted(tuple(map(int, r.range[len("bytes="):].split("-")))
                           for r in s.log() if r.range)
            for (a0, b0), (a1, b1) in zip(spans, spans[1:]):
                self.assertGreater(a1, b0, "each byte fetched once: %r" % spans)
            # a seek far ahead, past what read-ahead fetched (its window is at most 16
            # MiB, half the cache): small requests again
            s.clear_log()
            self.read_run(m, 60 * MIB, 2)
            # (a read-ahead request of before may still end after the clear)
            after = [range_length(r.range) for r in s.log()
                     if r.range and int(r.range[len("bytes="):].split("-")[0]) >= 60 * MIB]
            self.assertTrue(after, "the seek fetched")
            self.assertLessEqual(max(after), MIB, "no larger than the read after a seek: %r"
                                 % after)
            print("sequential: requests of %r KiB, %d at once; after a seek: %r KiB"
                  % ([n >> 10 for n in grown], in_flight, [n >> 10 for n in after]))

    def test_window_within_a_small_cache(self):
        with FaultServer({"/m.gguf": gm.read_file(self.model)}) as s, \
                EnvMount(s.url + "/m.gguf", ["-o", "cache_size=4M"]) as m:
            lengths = self.sequential(s, m, 16)
            self.assertLessEqual(max(lengths), MIB, lengths)
            self.assertGreaterEqual(s.max_in_flight, 2)

    def test_numpy_mmap_fetches_what_it_reads(self):
        row, cols = 5, MIB   # row 5's first values: 20 MiB into the tensor
        want = numpy.frombuffer(self.raw, numpy.float32)[row * cols:row * cols + 4]

        def pread(p):
            fd = os.open(os.path.join(p, "tensors", "w"), os.O_RDONLY)
            try:
                self.assertEqual(os.pread(fd, 16384, row * cols * 4),
                                 self.raw[row * cols * 4:row * cols * 4 + 16384])
            finally:
                os.close(fd)

        def load(p):
            a = numpy.load(os.path.join(p, "tensors", "w.npy"), mmap_mode="r")
            self.assertTrue(numpy.array_equal(a[row, :4], want))
            del a

        def memmap(p):
            a = numpy.memmap(os.path.join(p, "tensors", "w"), dtype=numpy.float32, mode="r")
            self.assertTrue(numpy.array_equal(a[row * cols:row * cols + 4], want))
            del a
        fetched = {}
        # nginx, not the fault server: a thread of this process waiting on a page fault
        # holds Python's lock, and the fault server's threads would wait for it
        root = public_root()
        try:
            shutil.copy(self.model, os.path.join(root, "m.gguf"))
            with Nginx(root) as n:
                self.fetch_each(n.url + "/m.gguf", fetched,
                                (("pread", pread), ("np.load", load), ("np.memmap", memmap)))
        finally:
            shutil.rmtree(root)
        self.assertGreater(fetched["pread"], 0)
        for name in ("np.load", "np.memmap"):
            self.assertLessEqual(fetched[name], 4 * fetched["pread"], fetched)

    def fetch_each(self, url, fetched, uses):
        """fetched[name]: the bytes a mount of url fetched for use(mountpoint), each use
        on a mount of its own."""
        for name, use in uses:
            with EnvMount(url) as m:
                time.sleep(0.5)   # past any change the daemon makes to its mount
                before = int(os.getxattr(m.path, "user.ggufs.bytes_fetched"))
                use(m.path)
                fetched[name] = int(os.getxattr(m.path, "user.ggufs.bytes_fetched")) - before


if __name__ == "__main__":
    gm.main()
