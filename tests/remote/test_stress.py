#!/usr/bin/env python3
"""Eight threads read random slices of a remote model (raw tensors and .f32, O_DIRECT so
that every read reaches the daemon; some sequential runs too, so read-ahead joins in)
for about 15 s, with a cache smaller than the model, while the fault server injects,
once or twice a second, a few 503s, connections reset mid-body and bodies cut short.
Every read succeeds (each fault is fewer than the retries), every byte equals the local
mount's, the server did see the faults, and the daemon unmounts cleanly."""
import os
import random
import shutil
import tempfile
import threading
import time
import unittest

from remote_common import EnvMount, FaultServer, gm, write_noise_model

THREADS = 8
DURATION = 15.0          # seconds of reading
DEADLINE = 120.0         # for the readers to finish after that


class Stress(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ggufs-stress-")
        cls.model = os.path.join(cls.dir, "m.gguf")
        write_noise_model(cls.model, [("w.%d" % i, [1024, 1024 + 512 * i]) for i in range(4)],
                          12)  # 4, 6, 8 and 10 MiB

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def test_random_reads_through_faults(self):
        with FaultServer({"/m.gguf": gm.read_file(self.model)}) as s, \
                gm.Mount(self.model) as local, \
                EnvMount(s.url + "/m.gguf", ["-o", "cache_size=8M", "-o", "timeout=5"]) as m:
            names = [n for n in sorted(os.listdir(local.p("tensors"))) if not n.endswith(".npy")]
            want = {n: gm.read_file(local.p("tensors", n)) for n in names}
            errors, reads = [], [0] * THREADS
            stop = threading.Event()

            def reader(i):
                rnd = random.Random(i)
                name = None
                try:
                    while not stop.is_set():
                        name = rnd.choice(names)
                        size = len(want[name])
                        off = rnd.randrange(0, size)
                        if rnd.random() < 0.1:  # a sequential run: read-ahead
                            pieces, length = 8, 256 * 1024
                        else:
                            pieces, length = 1, rnd.choice((1, 4096, 65536, 300000))
                        for _ in range(pieces):
                            n = min(length, size - off)
                            got = gm.pread_direct(m.p("tensors", name), n, off)
                            if got != want[name][off:off + n]:
                                errors.append("%s [%d, +%d): wrong bytes" % (name, off, n))
                                return
                            reads[i] += 1
                            off += n
                            if off >= size:
                                break
                except OSError as e:
                    errors.append("%s: %s" % (name, e))

            def injector():
                rnd = random.Random(99)
                while not stop.wait(rnd.uniform(0.5, 1.0)):
                    fault = rnd.choice(("503", "reset", "cut"))
                    if fault == "503":
                        s.fail_next(rnd.randint(1, 2), 503)
                    elif fault == "reset":
                        s.reset_next(1, after=rnd.randrange(0, 200000))
                    else:
                        s.truncate_next(1)

            threads = [threading.Thread(target=reader, args=(i,), daemon=True)
                       for i in range(THREADS)]
            threads.append(threading.Thread(target=injector, daemon=True))
            start = time.monotonic()
            for t in threads:
                t.start()
            stop.wait(DURATION)
            stop.set()
            for t in threads:
                t.join(max(0.0, DEADLINE - (time.monotonic() - start)))
            self.assertFalse(any(t.is_alive() for t in threads),
                             "readers still running after %g s" % DEADLINE)
            s.clear_failures()
            self.assertEqual(errors, [])
            self.assertIsNone(m.proc.poll(), "the daemon is alive")
            log = s.log()
            failed = sum(r.status == 503 for r in log)
            cut = sum(1 for r in log if r.status == 206 and r.range and
                      r.bytes_sent < range_len(r.range))
            print("%d reads from %d threads in %.1f s: %d requests, %d x 503, %d bodies reset "
                  "or cut short" % (sum(reads), THREADS, time.monotonic() - start, len(log),
                                    failed, cut))
            self.assertGreater(sum(reads), 100)
            self.assertGreater(failed + cut, 3, "faults were injected into live reads")


def range_len(header):
    """Bytes a 'bytes=A-B' Range header asks for."""
    a, _, b = header[len("bytes="):].partition("-")
    return int(b) - int(a) + 1


if __name__ == "__main__":
    gm.main()
