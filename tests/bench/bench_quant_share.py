#!/usr/bin/env python3
"""One disk cache for every mount (issue 45), printed, never asserted:
`meson test --benchmark quant_share`.

    python3 bench_quant_share.py GGUFS_BINARY

On a ~120 MB F16 llama of random weights (4 blocks, n_embd 1024, ff 2816, GQA 16/4,
8,000 tokens; made here with the tests' generator), quants/Q4_K_M.gguf read whole by
`cat`, each line its wall seconds and the reading mount's user.ggufs.blocks_computed
and blocks_from_disk against the file's blocks (128 KiB):

- cold: mount A on an empty cache_dir;
- two mounts at once: mount B of the same model and cache_dir while A is mounted (A's
  file held open);
- quick remount: A unmounted with `fusermount3 -u`, mount C at once (whether A's daemon
  was still alive when C's read began is printed);
- remount while the old daemon serves: C's file held open, C unmounted with
  `fusermount3 -u -z` (its daemon lives on, serving the open file, its session not
  ended), mount D at once.

BENCH_REPEAT=N runs it N times (default 1). The machine's load average ends each line."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mount"))
sys.path.insert(0, os.path.join(HERE, "..", "quant"))
import ggufs_mount as gm  # noqa: E402
import test_quant_plan as qp  # noqa: E402

BLOCK = 128 << 10   # COMPUTED_BLOCK_SIZE
NAME = "Q4_K_M"


def read_whole(m, what, alive=None):
    """cat of m's quants/NAME.gguf, said as one line: wall seconds, blocks computed and
    from disk of the file's; alive, when given, a process whose liveness at the start
    of the read is said."""
    path = m.p("quants", NAME + ".gguf")
    blocks = -(-os.stat(path).st_size // BLOCK)
    was_alive = alive is not None and alive.poll() is None
    t = time.monotonic()
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
    wall = time.monotonic() - t
    computed = int(os.getxattr(path, "user.ggufs.blocks_computed"))
    from_disk = int(os.getxattr(path, "user.ggufs.blocks_from_disk"))
    print("%-40s %6.2f s wall, %4d of %d blocks computed, %4d from disk%s | load %.1f"
          % (what, wall, computed, blocks, from_disk,
             "" if alive is None else
             (", old daemon alive" if was_alive else ", old daemon gone"),
             os.getloadavg()[0]), flush=True)


def one_round(model, cache):
    opts = ["-o", "cache_dir=" + cache]
    a = gm.Mount(model, opts).__enter__()
    c = None
    try:
        read_whole(a, "cold (mount A)")
        with open(a.p("quants", NAME + ".gguf"), "rb"):
            with gm.Mount(model, opts) as b:
                read_whole(b, "two mounts at once (B while A)")
        subprocess.run(["fusermount3", "-u", a.path], check=True)
        c = gm.Mount(model, opts).__enter__()
        read_whole(c, "quick remount after fusermount3 -u (C)", a.proc)
        with open(c.p("quants", NAME + ".gguf"), "rb"):
            subprocess.run(["fusermount3", "-u", "-z", c.path], check=True)
            with gm.Mount(model, opts) as d:
                read_whole(d, "remount, old daemon serving (D)", c.proc)
    finally:
        a.__exit__(None, None, None)   # (unmounted already: waits for its daemon)
        if c:
            c.__exit__(None, None, None)


def main():
    gm.setup()
    work = tempfile.mkdtemp(prefix="ggufs-bench-share-")
    try:
        model = os.path.join(work, "rand-1024.gguf")
        qp.random_llama(model, seed=45, n_embd=1024, n_ff=2816, n_layer=4, n_head=16,
                        n_head_kv=4, n_vocab=8000, gtype=qp.F16)
        print("model: %.0f MB F16 (random, 4 blocks, n_embd 1024, ff 2816); %s; %d cores"
              % (os.path.getsize(model) / 1e6, NAME, os.cpu_count()), flush=True)
        for i in range(int(os.environ.get("BENCH_REPEAT", "1"))):
            cache = os.path.join(work, "cache-%d" % i)
            one_round(model, cache)
            shutil.rmtree(cache)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
