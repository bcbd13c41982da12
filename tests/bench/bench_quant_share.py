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
  ended), mount D at once;
- against a local file (the anchor): a fresh mount E's whole read of the cached file
  against `cat` of a local copy of the same bytes, both with the page cache warm (the
  model, the cache and the copy read once before) and cold (dropped before each), the
  ratio of their speeds (the issue's aim: 0.8 or more), and quants/'s
  user.ggufs.tensors_hashed / tensors_hash_kept for E;
- every NAME of a smaller F16 model (31 MB) read whole on an empty cache: the cache's
  `du` against the bytes of its distinct converted (tensor, type) pairs (those whose
  type is not the model's: the least a cache keeping each once can hold).

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


def drop_page_cache():
    """Empties the page cache (root): what is read next comes from the disk."""
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def timed_cat(path):
    """Wall seconds of `cat path > /dev/null`."""
    t = time.monotonic()
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
    return time.monotonic() - t


def against_local(model, cache, work):
    """Mount E's whole read of the cached quant against a local copy's, warm and cold."""
    opts = ["-o", "cache_dir=" + cache]
    copy = os.path.join(work, "local-copy.gguf")
    with gm.Mount(model, opts) as m:
        shutil.copyfile(m.p("quants", NAME + ".gguf"), copy)
    size = os.path.getsize(copy)
    for state in ("warm", "cold"):
        if state == "warm":
            for p in [model, copy] + [os.path.join(d, f) for d, _, fs in os.walk(cache)
                                      for f in fs]:
                timed_cat(p)
        else:
            drop_page_cache()
        with gm.Mount(model, opts) as m:
            mounted = timed_cat(m.p("quants", NAME + ".gguf"))
            ids = tuple(int(os.getxattr(m.p("quants"), "user.ggufs.tensors_" + k))
                        for k in ("hashed", "hash_kept"))
        if state == "cold":
            drop_page_cache()
        local = timed_cat(copy)
        print("%-40s %6.3f s (%6.0f MB/s) vs local %6.3f s (%6.0f MB/s): %.2f x; "
              "tensors hashed %d, hash kept %d | load %.1f"
              % ("cached read (E), %s page cache" % state, mounted, size / mounted / 1e6,
                 local, size / local / 1e6, local / mounted, ids[0], ids[1],
                 os.getloadavg()[0]), flush=True)
    os.unlink(copy)


def tensor_sizes(data):
    """{tensor name: (type, bytes)} of a GGUF image (its data section from the infos)."""
    infos, end = qp.parse_infos(data, with_end=True)
    start = -(-end // 32) * 32
    offs = sorted(i[3] for i in infos) + [len(data) - start]
    sizes = {o: offs[k + 1] - o for k, o in enumerate(offs[:-1])}
    return {i[0]: (i[2], sizes[i[3]]) for i in infos}


def all_names(work):
    """Every NAME of a small model read on an empty cache: du against distinct pairs."""
    model = os.path.join(work, "rand-512.gguf")
    qp.random_llama(model, seed=46, n_embd=512, n_ff=1408, n_layer=4, n_head=8,
                    n_head_kv=4, n_vocab=8000, gtype=qp.F16)
    cache = os.path.join(work, "cache-all")
    with open(model, "rb") as f:
        source = tensor_sizes(f.read())
    pairs = {}
    with gm.Mount(model, ["-o", "cache_dir=" + cache]) as m:
        names = sorted(n[:-5] for n in os.listdir(m.p("quants")) if n.endswith(".gguf"))
        total = 0
        for name in names:
            with open(m.p("quants", name + ".gguf"), "rb") as f:
                data = f.read()
            total += len(data)
            for t, (typ, size) in tensor_sizes(data).items():
                if typ != source[t][0]:
                    pairs[(t, typ)] = size
    du = int(subprocess.run(["du", "-sb", cache], capture_output=True, check=True,
                            text=True).stdout.split()[0])
    distinct = sum(pairs.values())
    print("all %d NAMEs (%.1f MB of files): cache %.1f MB for %.1f MB of %d distinct "
          "converted (tensor, type) pairs: %.2f x | load %.1f"
          % (len(names), total / 1e6, du / 1e6, distinct / 1e6, len(pairs),
             du / distinct, os.getloadavg()[0]), flush=True)
    shutil.rmtree(cache)


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
            against_local(model, cache, work)
            shutil.rmtree(cache)
        all_names(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
