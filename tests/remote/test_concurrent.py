#!/usr/bin/env python3
"""Eight threads read random slices of a remote mount at once (raw tensors, .f32 and
.npy, O_DIRECT so that every read reaches the daemon) with a cache far smaller than
the model, so blocks are evicted and fetched again under the readers' feet. Every byte
equals the local mount's, no read fails, and it all ends within a deadline. Also: a
block wanted by eight readers at once is fetched once, and a sequential reader has
several requests in flight (read-ahead)."""
import os
import random
import threading
import time
import unittest

from remote_common import (TINY, EnvMount, FaultServer, Nginx, gm, install, public_root,
                           read_sequentially, tensor_extents)

THREADS = 8
READS_PER_THREAD = 1000
DEADLINE = 120.0


class Concurrent(unittest.TestCase):
    def test_random_slices_from_eight_threads(self):
        root = public_root()
        try:
            install(TINY, root, "tinyllama-q4km.gguf")
            with Nginx(root) as n, gm.Mount(TINY) as local, \
                    EnvMount(n.url + "/tinyllama-q4km.gguf", ["-o", "cache_size=1M"]) as m:
                names = sorted(os.listdir(local.p("tensors")))
                want = {name: gm.read_file(local.p("tensors", name)) for name in names}
                errors = []

                def reader(seed):
                    rnd = random.Random(seed)
                    try:
                        for _ in range(READS_PER_THREAD):
                            name = rnd.choice(names)
                            size = len(want[name])
                            off = rnd.randrange(0, size)
                            length = min(rnd.choice((1, 100, 4096, 65536, 300000)), size - off)
                            got = gm.pread_direct(m.p("tensors", name), length, off)
                            if got != want[name][off:off + length]:
                                errors.append("%s [%d, +%d): wrong bytes" % (name, off, length))
                                return
                    except OSError as e:
                        errors.append("%s: %s" % (name, e))

                threads = [threading.Thread(target=reader, args=(i,), daemon=True)
                           for i in range(THREADS)]
                start = time.monotonic()
                self.assertEqual(gm.run_threads(threads, DEADLINE), [],
                                 "readers still running after %g s" % DEADLINE)
                self.assertEqual(errors, [])
                self.assertIsNone(m.proc.poll())
                print("%d reads from %d threads in %.1f s, %d requests"
                      % (THREADS * READS_PER_THREAD, THREADS, time.monotonic() - start,
                         len(n.records())))
        finally:
            import shutil
            shutil.rmtree(root)

    def test_one_fetch_per_block(self):
        """Eight readers of the same cold 4 KiB at once: each block is fetched once."""
        extents = tensor_extents(TINY)
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s, gm.Mount(TINY) as local, \
                EnvMount(s.url + "/m.gguf") as m:
            s.latency = 0.5  # so that the readers' requests would overlap
            path = m.p("tensors", "output.weight.f32")
            local_f32 = gm.read_file(local.p("tensors", "output.weight.f32"))
            # three quarters in: past the first MiB, which the mount fetched already
            at = (len(local_f32) * 3 // 4) & ~4095
            want = local_f32[at:at + 4096]
            s.clear_log()
            got = [None] * THREADS
            threads = [threading.Thread(target=lambda i=i: got.__setitem__(
                i, gm.pread_direct(path, 4096, at)), daemon=True) for i in range(THREADS)]
            self.assertEqual(gm.run_threads(threads, DEADLINE), [])
            self.assertEqual(got, [want] * THREADS)
            log = s.log_settled(1)
            ranges = [r.range for r in log]
            self.assertTrue(1 <= len(ranges) <= 2, "one block, or two at a boundary: %r" % ranges)
            self.assertEqual(len(set(ranges)), len(ranges), "no block twice: %r" % ranges)
            a, b = extents["output.weight"]
            self.assertTrue(all(a - (128 << 10) <= int(r[6:].split("-")[0]) < b for r in ranges))

    def test_sequential_reader_has_requests_in_flight(self):
        """A sequential reader gets read-ahead: several requests at the server at once."""
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s, gm.Mount(TINY) as local, \
                EnvMount(s.url + "/m.gguf") as m:
            s.latency = 0.2
            s.clear_log()
            start = time.monotonic()
            got = read_sequentially(m.p("tensors", "output.weight"))
            elapsed = time.monotonic() - start
            self.assertEqual(got, gm.read_file(local.p("tensors", "output.weight")))
            n = len(s.log_settled(1))
            print("%d bytes read in %.2f s with 0.2 s per request: %d requests, at most %d "
                  "at once" % (len(got), elapsed, n, s.max_in_flight))
            self.assertGreaterEqual(s.max_in_flight, 2)


if __name__ == "__main__":
    gm.main()
