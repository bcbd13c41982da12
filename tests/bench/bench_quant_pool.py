#!/usr/bin/env python3
"""The threads and memory of quants/ (issue 43, items 3, 7 and 9), printed, never
asserted: `meson test --benchmark`.

    python3 bench_quant_pool.py GGUFS_BINARY

On a random F16 llama of 15 MB (tests/quant's generator):

  - every NAME of one model read whole at once, one reader each: the daemon's threads
    and RssAnon before, at their peak and 3 s after (the pool's workers end after 2 s
    idle), the blocks the first mount computed, and those a second mount computes again
    (the disk cache kept every block: 0);
  - a library of 10 models (hard links of the model), 4 NAMEs of each read at once: the
    daemon's threads at the peak and 3 s after;
  - a library of 12 models, a MB of IQ3_S.gguf of each read in turn three times (a
    model goes idle at each close, and past 8 idle the least recently used is released
    while the blocks made ahead of its reader may be in the making), while another
    thread lists the library's root without pause: the slowest and the median listing."""
import os
import statistics
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mount"))
sys.path.insert(0, os.path.join(HERE, "..", "quant"))
import ggufs_mount as gm  # noqa: E402
import test_quant_plan as qp  # noqa: E402

BLOCK = 128 << 10


def read_all(paths):
    """Each of paths read whole, each by its own thread, at once (an hour at the most)."""
    gm.run_threads([threading.Thread(target=qp.sha256_file, args=(p,)) for p in paths], 3600)


def blocks(path, what):
    return int(os.getxattr(path, "user.ggufs.blocks_" + what))


def one_model(model, cache):
    opts = ["-o", "cache_dir=" + cache]
    with gm.Mount(model, opts) as m:
        names = sorted(n for n in os.listdir(m.p("quants")) if n.endswith(".gguf"))
        paths = [m.p("quants", n) for n in names]
        pid = m.proc.pid
        before = (gm.tasks(pid), gm.rss_anon(pid) / 2**20)
        t = time.monotonic()
        with gm.Peak(pid) as s:
            read_all(paths)
        took = time.monotonic() - t
        time.sleep(3)
        after = (gm.tasks(pid), gm.rss_anon(pid) / 2**20)
        computed = sum(blocks(p, "computed") for p in paths)
    print("one model, %d NAMEs read at once (%.1f s): threads %d, peak %d, 3 s after %d; "
          "RssAnon %.1f MB, peak %.1f, after %.1f; blocks computed %d"
          % (len(paths), took, before[0], s.threads, after[0], before[1], s.rss / 2**20,
             after[1], computed), flush=True)
    with gm.Mount(model, opts) as m:
        read_all([m.p("quants", n) for n in names])
        again = sum(blocks(m.p("quants", n), "computed") for n in names)
    print("  a second mount computed %d blocks again" % again, flush=True)


def library(tmp, model, n_models):
    root = os.path.join(tmp, "library-%d" % n_models)
    os.makedirs(root)
    for i in range(n_models):
        os.link(model, os.path.join(root, "m%02d.gguf" % i))
    return root


def library_threads(tmp, model):
    root = library(tmp, model, 10)
    with gm.Mount(root, ["-o", "cache_dir=none"]) as m:
        paths = [m.p("m%02d" % i, "quants", n + ".gguf") for i in range(10)
                 for n in ("Q4_0", "Q8_0", "Q4_K_M", "Q6_K")]
        with gm.Peak(m.proc.pid) as s:
            read_all(paths)
        time.sleep(3)
        print("a library of 10 models, 40 files read at once: threads peak %d, 3 s after %d"
              % (s.threads, gm.tasks(m.proc.pid)), flush=True)


def listing_stall(tmp, model):
    root = library(tmp, model, 12)
    with gm.Mount(root, ["-o", "cache_dir=none"]) as m:
        def listings(reads):
            done = threading.Event()
            times = []

            def lister():
                while not done.is_set():
                    t = time.monotonic()
                    os.listdir(m.path)
                    times.append(time.monotonic() - t)
            li = threading.Thread(target=lister)
            li.start()
            try:
                if reads:
                    for _ in range(3):
                        for i in range(12):
                            with open(m.p("m%02d" % i, "quants", "IQ3_S.gguf"), "rb") as f:
                                f.read(1 << 20)
                else:
                    time.sleep(5)
            finally:
                done.set()
                li.join()
            times.sort()
            return "%d listings: slowest %.3f s, 99th percentile %.4f s, median %.5f s" % (
                len(times), times[-1], times[len(times) * 99 // 100], statistics.median(times))
        print("the root of a library of 12 models listed without pause, for 5 s alone: %s"
              % listings(False), flush=True)
        print("  while a MB of IQ3_S.gguf of each model is read in turn, 3 times (idle "
              "models released past 8): %s" % listings(True), flush=True)


def main():
    gm.setup()
    tmp = tempfile.mkdtemp(prefix="ggufs-bench-quant-pool-")
    try:
        model = os.path.join(tmp, "rand.gguf")
        qp.random_llama(model, seed=21, n_embd=512, n_ff=1408, n_layer=2, n_head=8,
                        n_head_kv=4, n_vocab=2000, gtype=qp.F16)
        print("%d online cores" % os.cpu_count(), flush=True)
        one_model(model, os.path.join(tmp, "cache"))
        library_threads(tmp, model)
        listing_stall(tmp, model)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
