#!/usr/bin/env python3
"""A library's memory while its files keep changing (issue 37, item 6), printed, never
asserted: `meson test --benchmark`.

    python3 bench_library_slots.py GGUFS_BINARY [ROUNDS]

A folder of 2,000 small files; each round touches every file (a new version of each:
its times change) and stats one name through the mount (the folder is listed again).
The daemon's RSS (VmRSS) is printed every 500 rounds and at the end, after ROUNDS
(4,000 by default). Each version of a file is a slot; before slots were freed, RSS grew
with every round (3.2 GB after 4,000 in the review) and a mount stopped listing changes
after 2^23 slots."""
import os
import sys
import tempfile
import shutil
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mount"))
import ggufs_mount as gm  # noqa: E402

N_FILES = 2000


def main():
    gm.setup()
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    tmp = tempfile.mkdtemp(prefix="ggufs-bench-slots-")
    try:
        src = os.path.join(tmp, "files")
        os.mkdir(src)
        paths = [os.path.join(src, "f%04d.txt" % i) for i in range(N_FILES)]
        for p in paths:
            with open(p, "wb") as f:
                f.write(b"x")
        with gm.Mount(src) as m:
            os.stat(m.p("f0000.txt"))
            print("rounds  seconds  VmRSS (MB)", flush=True)
            print("%6d  %7.1f  %9.1f" % (0, 0, gm.proc_status(m.proc.pid, "VmRSS", gone=0) // 1024 / 1024), flush=True)
            t = time.monotonic()
            for r in range(1, rounds + 1):
                ns = r * 1000
                for p in paths:
                    os.utime(p, ns=(ns, ns))
                os.stat(m.p("f0000.txt"))
                if r % 500 == 0 or r == rounds:
                    print("%6d  %7.1f  %9.1f" % (r, time.monotonic() - t,
                                                 gm.proc_status(m.proc.pid, "VmRSS", gone=0) // 1024 / 1024), flush=True)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
