#!/usr/bin/env python3
"""model.gguf with FUSE passthrough against without it (issue 30), printed, never
asserted: `meson test --benchmark passthrough`.

    python3 bench_passthrough.py GGUFS_BINARY

1. `cp model.gguf /dev/null` through a fresh local mount, cold (the file's pages dropped
   with POSIX_FADV_DONTNEED) and warm (the same cp again), against `cp` of the file
   itself, with passthrough and with -o passthrough=no (targets with it: >= 0.95x), and
   inside a library mount of the model's folder (its backing id opened at the open);
   best of TRIES, on a 1 GiB model (one random f32 tensor);
2. llama.cpp's loadModel (node-llama-cpp, tests/llama) of model.gguf of a generated
   113 MB q8_0 llama model (bench_modelfile's), cold, with mmap and with --no-mmap,
   against the file itself (target with passthrough: <= 1.05x);
3. the page cache after one whole read of model.gguf through a fresh mount (the file's
   pages dropped first): cachestat(2) (syscall 451) of the GGUF file and of model.gguf,
   with passthrough and without: the model held once, or twice.
Each figure comes with the attribute user.ggufs.passthrough of the mount it ran on, and
the reads the daemon served.
4. cp's posix_fadvise(POSIX_FADV_SEQUENTIAL) under passthrough: how far the kernel
   reads ahead of a reader 32 MiB into the 1 GiB file, on the file and on model.gguf,
   with and without the advice (cachestat); then BENCH_ROUNDS (10) interleaved rounds
   of cold cp, cold 128 KiB reads with and without the advice, and warm cp, of the file
   and of model.gguf: medians and spread of the ratios, pair by pair, with the load.
Skips part 2 without node-llama-cpp. BENCH_ONLY=cp, load, memory or advice runs one
part; BENCH_TRIES=N takes the best of N (3)."""
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
sys.path.insert(0, HERE)

import bench_modelfile as bm  # noqa: E402
from remote_common import gm  # noqa: E402

TRIES = int(os.environ.get("BENCH_TRIES", "3"))   # more on a busy machine
BIG = 1 << 30
NR_CACHESTAT = 451
MODES = (("passthrough", []), ("passthrough=no", ["-o", "passthrough=no"]))


class CachestatRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class Cachestat(ctypes.Structure):
    _fields_ = [("nr_cache", ctypes.c_uint64), ("nr_dirty", ctypes.c_uint64),
                ("nr_writeback", ctypes.c_uint64), ("nr_evicted", ctypes.c_uint64),
                ("nr_recently_evicted", ctypes.c_uint64)]


LIBC = ctypes.CDLL(None, use_errno=True)


def cached_bytes(path):
    """Bytes of path's own page cache (its inode's, not another file's), by cachestat."""
    fd = os.open(path, os.O_RDONLY)
    try:
        rng, cs = CachestatRange(0, 0), Cachestat()   # len 0: to the end of the file
        if LIBC.syscall(NR_CACHESTAT, fd, ctypes.byref(rng), ctypes.byref(cs), 0) != 0:
            raise OSError(ctypes.get_errno(), "cachestat(%s)" % path)
        return cs.nr_cache * os.sysconf("SC_PAGE_SIZE")
    finally:
        os.close(fd)


def cp_seconds(path, drop=None):
    """Seconds of `cp path /dev/null`, with drop's pages dropped first if given."""
    if drop:
        gm.drop_pages(drop)
    start = time.monotonic()
    subprocess.run(["cp", path, "/dev/null"], check=True)
    return time.monotonic() - start


def state(m, path=None):
    return os.getxattr(path or m.p("model.gguf"), "user.ggufs.passthrough").decode()


def reads(m):
    return int(os.getxattr(m.path, "user.ggufs.reads"))


def copies(model):
    """Part 1."""
    size = os.path.getsize(model)
    cold_file = min(cp_seconds(model, model) for _ in range(TRIES))
    warm_file = min(cp_seconds(model) for _ in range(TRIES))
    print("cp of the file (%.0f MB): cold %.0f MB/s, warm %.0f MB/s"
          % (size / 1e6, size / cold_file / 1e6, size / warm_file / 1e6))
    # a library of the model's folder: model.gguf of its directory
    name = os.path.splitext(os.path.basename(model))[0]
    in_library = ("in a library, passthrough", [], os.path.dirname(model), (name, "model.gguf"))
    for label, opts, source, rel in [(l, o, model, ("model.gguf",)) for l, o in MODES] + [in_library]:
        cold, warm, why, served = [], [], "", 0
        for _ in range(TRIES):
            with gm.Mount(source, opts) as m:
                path = m.p(*rel)
                why = state(m, path)
                before = reads(m)
                cold.append(cp_seconds(path, model))
                warm.append(cp_seconds(path))
                served = reads(m) - before
        print("  cp of model.gguf, %s (%s): cold %.0f MB/s = %.2fx the file, warm %.0f MB/s "
              "= %.2fx (target with passthrough >= 0.95x); %d reads reached the daemon"
              % (label, why, size / min(cold) / 1e6, cold_file / min(cold),
                 size / min(warm) / 1e6, warm_file / min(warm), served))


AHEAD_AT = 32 << 20   # how far into the file the read-ahead is looked at
PIECE = 128 << 10     # cp's read size (coreutils 9)


def read_cold(path, model, advice, upto=None):
    """Seconds to read path from its start (to upto, else whole) in PIECE reads as cp
    does, model's pages dropped first, after posix_fadvise(advice) on path if given."""
    gm.drop_pages(model)
    buf = bytearray(PIECE)
    start = time.monotonic()
    with open(path, "rb", buffering=0) as f:
        if advice is not None:
            os.posix_fadvise(f.fileno(), 0, 0, advice)
        n = 0
        while upto is None or n < upto:
            got = f.readinto(buf)
            if not got:
                break
            n += got
    return time.monotonic() - start


def spread(values):
    """'median (min-max)' of values."""
    v = sorted(values)
    return "%.3f (%.3f-%.3f)" % (v[len(v) // 2] if len(v) % 2 else
                                 (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2, v[0], v[-1])


def advice(model):
    """Part 4: cp's posix_fadvise(POSIX_FADV_SEQUENTIAL) under passthrough. How far the
    kernel reads ahead of a reader AHEAD_AT into the file (cachestat of the file), then
    ROUNDS interleaved rounds of cold reads (cp, and PIECE reads with and without the
    advice) of the file and of model.gguf through one passthrough mount: the median and
    spread of the ratios file time / model.gguf time, pair by pair."""
    rounds = int(os.environ.get("BENCH_ROUNDS", "10"))
    seq = os.POSIX_FADV_SEQUENTIAL
    with gm.Mount(model, []) as m:
        path = m.p("model.gguf")
        print("advice: model.gguf %s; read-ahead %d KiB (%s), kernel read-ahead cached "
              "past a reader %d MiB in:" % (
                  state(m, path), int(open("/sys/block/%s/queue/read_ahead_kb" % disk_of(model))
                                      .read()) if disk_of(model) else -1,
                  disk_of(model) or "device unknown", AHEAD_AT >> 20))
        for label, p in (("file", model), ("model.gguf", path)):
            for name, adv in (("no advice", None), ("POSIX_FADV_SEQUENTIAL", seq)):
                read_cold(p, model, adv, AHEAD_AT)
                time.sleep(0.5)   # the read-ahead in flight lands (and the next drop drops it)
                ahead = cached_bytes(model) - AHEAD_AT
                print("  %-10s %-22s %6d KiB ahead" % (label, name, ahead >> 10))
        kinds = (("cp", lambda p: cp_seconds(p, model)),
                 ("read, POSIX_FADV_SEQUENTIAL", lambda p: read_cold(p, model, seq)),
                 ("read, no advice", lambda p: read_cold(p, model, None)),
                 ("cp warm", lambda p: cp_seconds(p)))
        if rounds < 1:
            return
        times = {k: ([], []) for k, _ in kinds}
        loads = []
        for r in range(rounds):
            loads.append(os.getloadavg()[0])
            for k, run in kinds:
                pair = (model, path) if r % 2 == 0 else (path, model)   # each first in turn
                got = {p: run(p) for p in pair}
                times[k][0].append(got[model])
                times[k][1].append(got[path])
        size = os.path.getsize(model)
        print("  %d rounds, load average %s (1 min, median (min-max))" % (rounds, spread(loads)))
        for k, _ in kinds:
            f, g = times[k]
            print("  %-28s file %4.0f MB/s, model.gguf %4.0f MB/s: %sx the file" % (
                k, size / sorted(f)[len(f) // 2] / 1e6, size / sorted(g)[len(g) // 2] / 1e6,
                spread([a / b for a, b in zip(f, g)])))


def disk_of(path):
    """The block device name (vda) of path's file system, or None."""
    try:
        dev = os.stat(path).st_dev
        name = os.path.basename(os.readlink("/sys/dev/block/%d:%d" % (os.major(dev), os.minor(dev))))
        if os.path.exists("/sys/block/%s/queue/read_ahead_kb" % name):
            return name
        parent = os.path.basename(os.path.dirname(os.readlink(
            "/sys/dev/block/%d:%d" % (os.major(dev), os.minor(dev)))))
        return parent if os.path.exists("/sys/block/%s/queue/read_ahead_kb" % parent) else None
    except OSError:
        return None


def loads(model):
    """Part 2."""
    if not bm.llama_ready():
        print("(node-llama-cpp not installed: no loadModel figures)")
        return
    for mmap in (True, False):
        direct = min(bm.load_ms(model, mmap, lambda: gm.drop_pages(model)) for _ in range(TRIES))
        line = "loadModel, cold, %s: the file %.0f ms" % ("mmap" if mmap else "--no-mmap",
                                                          direct)
        for label, opts in MODES:
            mounted = []
            for _ in range(TRIES):
                with gm.Mount(model, opts) as m:
                    mounted.append(bm.load_ms(m.p("model.gguf"), mmap, lambda: gm.drop_pages(model)))
            line += "; %s %.0f ms = %.2fx" % (label, min(mounted), min(mounted) / direct)
        print(line + " (target with passthrough <= 1.05x)")


def memory(model):
    """Part 3."""
    size = os.path.getsize(model)
    for label, opts in MODES:
        with gm.Mount(model, opts) as m:
            gm.drop_pages(model)
            before_file = cached_bytes(model)
            subprocess.run(["cp", m.p("model.gguf"), "/dev/null"], check=True)
            f, g = cached_bytes(model), cached_bytes(m.p("model.gguf"))
            print("page cache after one read of model.gguf (%.0f MB), %s (%s): the GGUF file "
                  "%.0f MB (%.0f before), model.gguf %.0f MB: %.0f MB in all, %.2fx the model"
                  % (size / 1e6, label, state(m), f / 1e6, before_file / 1e6, g / 1e6,
                     (f + g) / 1e6, (f + g) / size))


def main():
    gm.setup()
    directory = tempfile.mkdtemp(prefix="ggufs-bench-pt-", dir=os.environ.get("BENCH_DIR"))
    try:
        os.mkdir(os.path.join(directory, "library"))   # the big model's folder alone
        big = os.path.join(directory, "library", "big.gguf")
        gm.write_gguf(big, [("general.architecture", "none")],
                      [("data", [BIG // 4], bm.GGML_F32, os.urandom(BIG))])
        llama = os.path.join(directory, "llama.gguf")
        bm.write_llama(llama)
        os.sync()   # dirty pages would stay in the page cache whatever is dropped
        print("kernel %s; load average at start: %s" % (
            os.uname().release, " ".join(open("/proc/loadavg").read().split()[:3])))
        only = os.environ.get("BENCH_ONLY")
        if only in (None, "cp"):
            copies(big)
        if only in (None, "load"):
            loads(llama)
        if only in (None, "memory"):
            memory(big)
            memory(llama)
        if only in (None, "advice"):
            advice(big)
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
