#!/usr/bin/env python3
"""Eight threads read random slices of a remote mount at once (raw tensors, .f32 and
.npy, O_DIRECT so that every read reaches the daemon) with a cache far smaller than
the model, so blocks are evicted and fetched again under the readers' feet. Every byte
equals the local mount's, no read fails, and it all ends within a deadline."""
import os
import random
import threading
import time
import unittest

from remote_common import TINY, EnvMount, Nginx, gm, install, public_root

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
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(max(0.0, DEADLINE - (time.monotonic() - start)))
                self.assertFalse(any(t.is_alive() for t in threads),
                                 "readers still running after %g s" % DEADLINE)
                self.assertEqual(errors, [])
                self.assertIsNone(m.proc.poll())
                print("%d reads from %d threads in %.1f s, %d requests"
                      % (THREADS * READS_PER_THREAD, THREADS, time.monotonic() - start,
                         len(n.records())))
        finally:
            import shutil
            shutil.rmtree(root)


if __name__ == "__main__":
    gm.main()
