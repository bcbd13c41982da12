#!/usr/bin/env python3
"""Stress: 8 threads doing random preads over every file of the mounted bundled model
for 20 seconds (GGUFS_STRESS_SECONDS to change it), every byte compared with a
sequential read of the same file done first.

Most reads use O_DIRECT, so that each (offset, length) reaches the daemon as asked,
unaligned and of any size; the others are buffered preads after dropping the file's
pages, so that the kernel's page-sized and readahead requests reach it too. Without
that, every read after the reference pass would come from the page cache (ggufs sets
keep_cache) and the daemon would see nothing."""
import os
import random
import threading
import time
import unittest

import ggufs_mount as gm

THREADS = 8
SECONDS = float(os.environ.get("GGUFS_STRESS_SECONDS", "20"))
RSS_ANON_LIMIT_MB = 64   # issue 4: however many files are read


def sanitized(pid):
    """True when the daemon runs under ASan/UBSan, whose shadow memory and quarantine
    are anonymous memory too."""
    with open("/proc/%d/maps" % pid) as f:
        return any("libasan" in line or "libubsan" in line for line in f)


def all_files(root):
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        out += [os.path.join(dirpath, f) for f in sorted(files)]
    return out


def sequential_read(path):
    """The whole file by plain read(2) calls from offset 0: the reference."""
    chunks = []
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks)


def drop_pages(fd, off=0, length=0):
    os.posix_fadvise(fd, off, length, os.POSIX_FADV_DONTNEED)


def pread_all(fd, length, off):
    """pread until length bytes or the end of the file."""
    out = []
    got = 0
    while got < length:
        b = os.pread(fd, length - got, off + got)
        if not b:
            break
        out.append(b)
        got += len(b)
    return b"".join(out)


def random_range(rng, size):
    """An offset and a length: mostly unaligned, small and large, near page and
    block edges, at and past the end of the file."""
    r = rng.random()
    if r < 0.1:
        off = size - rng.randint(0, min(size, 300))     # the tail, and exactly the end
    elif r < 0.3 and size > 4096:
        edge = rng.randrange(0, size, 4096)
        off = max(0, min(size, edge + rng.randint(-40, 40)))
    elif r < 0.35:
        off = size + rng.randint(1, 5000)                # past the end: empty
    else:
        off = rng.randint(0, size)
    r = rng.random()
    if r < 0.3:
        length = rng.randint(1, 16)
    elif r < 0.6:
        length = rng.randint(1, 5000)
    elif r < 0.9:
        length = rng.randint(1, 300000)
    else:
        length = rng.randint(1, 3 << 20)
    return off, length


class Stress(unittest.TestCase):

    def test_random_preads(self):
        with gm.Mount(gm.TINY) as m:
            files = all_files(m.path)
            self.assertGreater(len(files), 80)
            ref = {}
            for p in files:
                ref[p] = sequential_read(p)
                self.assertEqual(len(ref[p]), os.path.getsize(p), p)
            # the reference is not itself garbage: raw tensor files are the model's bytes
            model = gm.read_file(gm.TINY)
            for p in files:
                if "/tensors/" in p and not p.endswith((".f32", ".npy")):
                    off = int(os.getxattr(p, "user.gguf.offset"))
                    self.assertEqual(ref[p], model[off:off + len(ref[p])], p)
            for p in files:
                fd = os.open(p, os.O_RDONLY)
                drop_pages(fd)
                os.close(fd)

            deadline = time.monotonic() + SECONDS
            counts = [0] * THREADS
            failures = []

            def worker(i):
                rng = random.Random(1000 + i)
                fds = {}
                try:
                    while time.monotonic() < deadline and not failures:
                        p = rng.choice(files)
                        size = len(ref[p])
                        off, length = random_range(rng, size)
                        direct = rng.random() < 0.7
                        key = (p, direct)
                        if key not in fds:
                            fds[key] = os.open(p, os.O_RDONLY | (os.O_DIRECT if direct else 0))
                        fd = fds[key]
                        if not direct and off < size:
                            drop_pages(fd, off, length)
                        try:
                            got = pread_all(fd, length, off)
                        except OSError as e:
                            failures.append("%s: pread(%d, %d)%s: %s"
                                            % (p, length, off, " O_DIRECT" if direct else "", e))
                            return
                        want = ref[p][off:off + length]
                        if got != want:
                            bad = next((k for k in range(min(len(got), len(want)))
                                        if got[k] != want[k]), min(len(got), len(want)))
                            failures.append("%s: pread(%d, %d)%s: %d bytes, want %d; "
                                            "first difference at byte %d of the file"
                                            % (p, length, off, " O_DIRECT" if direct else "",
                                               len(got), len(want), off + bad))
                            return
                        counts[i] += 1
                except Exception as e:  # reported, not lost in the thread
                    failures.append("thread %d: %r" % (i, e))
                finally:
                    for fd in fds.values():
                        os.close(fd)

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(SECONDS + 120)
                self.assertFalse(t.is_alive(), "a reader hangs")
            self.assertEqual(failures, [])
            self.assertIsNone(m.proc.poll(), "the daemon died")
            # every thread kept reading the whole time, not just once
            for i, n in enumerate(counts):
                self.assertGreater(n, 20, "thread %d did only %d reads" % (i, n))
            print("\n%d reads in %g s by %d threads" % (sum(counts), SECONDS, THREADS))
            # every worker thread has its reply buffer by now: memory stays bounded
            rss = gm.rss_anon(m.proc.pid) / 2**20
            if sanitized(m.proc.pid):
                print("daemon RssAnon %.1f MB (sanitizer build: limit not checked)" % rss)
            else:
                print("daemon RssAnon %.1f MB" % rss)
                self.assertLessEqual(rss, RSS_ANON_LIMIT_MB)


if __name__ == "__main__":
    gm.main()
