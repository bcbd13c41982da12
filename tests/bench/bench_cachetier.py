#!/usr/bin/env python3
"""The shared cache tier (issue 28), printed, never asserted: `meson test --benchmark`.

    python3 bench_cachetier.py GGUFS_BINARY

Three mounts on this machine load the same 100 MB model (model.gguf read whole, as a
loader reads it, all three at once) from an origin that stands for a remote store: the
fault server with each connection limited to 50 MB/s and 20 ms added to every request.
Once straight from the origin, once through the tier (man/nginx-cache-tier.conf,
cold), and once more through the warm tier (three new mounts, no disk cache): for each,
the origin's body bytes and requests, and the wall time of the three loads."""
import hashlib
import os
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "remote"))

from cachetier import SliceCache  # noqa: E402
from remote_common import EnvMount, FaultServer, gm  # noqa: E402

SIZE = 100 << 20
RATE = 50_000_000
LATENCY = 0.02
PATH = "/models/bench.gguf"


def load_all(urls):
    """Mounts each URL, reads every model.gguf whole at once; (seconds, sha256s)."""
    mounts = [EnvMount(u) for u in urls]
    for m in mounts:
        m.__enter__()
    try:
        sums = [None] * len(mounts)

        def run(i):
            h = hashlib.sha256()
            with open(mounts[i].p("model.gguf"), "rb") as f:
                while True:
                    b = f.read(1 << 20)
                    if not b:
                        break
                    h.update(b)
            sums[i] = h.hexdigest()
        start = time.monotonic()
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(mounts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.monotonic() - start, sums
    finally:
        for m in mounts:
            m.__exit__(None, None, None)


def main():
    gm.setup()
    tmp = tempfile.mkdtemp(prefix="ggufs-bench-tier-")
    try:
        import random
        path = os.path.join(tmp, "bench.gguf")
        gm.write_gguf(path, [("general.architecture", "llama"), ("general.name", "bench")],
                      [("w", [SIZE // 4], 0, random.Random(3).randbytes(SIZE))])
        data = gm.read_file(path)
        want = hashlib.sha256(data).hexdigest()
        print("three mounts load a %.0f MB model at once; origin: %d MB/s per connection, "
              "+%d ms per request" % (len(data) / 1e6, RATE / 1e6, LATENCY * 1000))
        with FaultServer({PATH: data}) as s:
            s.rate, s.latency = RATE, LATENCY

            def run(label, urls):
                s.quiet()
                s.clear_log()
                seconds, sums = load_all(urls)
                s.quiet()
                log = s.log()
                ok = "right" if sums == [want] * len(urls) else "WRONG sha256"
                print("  %-26s origin %7.1f MB in %4d requests, %6.2f s wall (%s)"
                      % (label, sum(r.bytes_sent for r in log) / 1e6, len(log), seconds, ok))

            run("without the tier", [s.url + PATH] * 3)
            with SliceCache(s.url) as tier:
                run("through the tier, cold", [tier.url + PATH] * 3)
                run("through the tier, warm", [tier.url + PATH] * 3)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
