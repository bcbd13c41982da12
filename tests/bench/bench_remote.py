#!/usr/bin/env python3
"""Remote mounts' speed (issue 11), printed, never asserted: `meson test --benchmark`.

    python3 bench_remote.py GGUFS_BINARY

1. The fault server's own ceiling on this machine: 8 concurrent curl range readers, no
   limits (a Python server may be the bottleneck of what follows; this says how much).
2. Against the fault server with each connection limited to 25 MB/s and 50 ms added to
   every request: a sequential cold read of a 2048x32000 q4_K tensor's .f32 through a
   remote mount: fetched MB/s, .f32 MB/s, and the ratio to one connection's rate
   (measured with curl, and the nominal 25 MB/s); target >= 4x.
3. Mounting a 150k-vocabulary model through the same server: requests (target <= 3)
   and time.
4. Against nginx on loopback with no limits: the same cold .f32 read through a remote
   mount and a local mount, their ratio (target >= 0.5x), and the daemon's peak RssAnon
   during it against cache_size + 64 MB.
5. numpy's mmap on a remote mount (issue 29): the bytes fetched for one row's first
   values by np.load(mmap_mode='r') and np.memmap against a 16 KiB pread of the same
   place (target: within 4x), and a sequential read of model.gguf; each with the
   mount's read-ahead as ggufs leaves it for a remote model (the kernel's 128 KiB) and
   as it was before (4 MiB, written here to the mount's bdi).

The models are generated here, in a temporary directory removed at the end."""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "remote"))

import numpy  # noqa: E402

import remote_common as rc  # noqa: E402
from remote_common import EnvMount, FaultServer, Nginx, gm  # noqa: E402

GGML_Q4_K = 12
ROWS, COLS = 32000, 2048          # ne1 x ne0: 2048 wide, 32000 rows
RATE = 25_000_000                 # bytes/s per connection
LATENCY = 0.05                    # seconds per request
CACHE = 256 << 20                 # the default cache_size
PIECE = 1 << 20                   # the reader's read size


def write_q4k_model(path):
    """A GGUF with one 2048x32000 q4_K tensor of valid blocks (small positive scales,
    random quants and sub-scales). Returns the tensor's raw size."""
    n_blocks = ROWS * COLS // 256
    rng = numpy.random.default_rng(11)
    blocks = rng.integers(0, 256, size=(n_blocks, 144), dtype=numpy.uint8)
    blocks[:, 0:2] = numpy.frombuffer(numpy.float16(0.01).tobytes(), numpy.uint8)
    blocks[:, 2:4] = numpy.frombuffer(numpy.float16(0.002).tobytes(), numpy.uint8)
    raw = blocks.tobytes()
    gm.write_gguf(path, [("general.architecture", "llama"), ("general.name", "bench")],
                  [("w", [COLS, ROWS], GGML_Q4_K, raw)])
    return len(raw)


def curl_range(url, first, last, out=None):
    """Runs curl for bytes [first, last] of url; returns (seconds, bytes)."""
    start = time.monotonic()
    r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download}",
                        "-r", "%d-%d" % (first, last), url],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=300, check=True)
    return time.monotonic() - start, int(r.stdout)


def concurrent_curls(url, size, n):
    """n curls at once, each for a 1/n share of [0, size): aggregate MB/s."""
    share = size // n
    results = [None] * n
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(
        i, curl_range(url, i * share, (i + 1) * share - 1))) for i in range(n)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    return sum(b for _, b in results) / elapsed / 1e6


def read_all(path, pid=None, peak=None):
    """Reads path sequentially in PIECE reads: (seconds, bytes), sampling pid's RssAnon
    into peak[0] along the way."""
    n = 0
    start = time.monotonic()
    with open(path, "rb", buffering=0) as f:
        i = 0
        while True:
            b = f.read(PIECE)
            if not b:
                break
            n += len(b)
            i += 1
            if pid and i % 16 == 0:
                peak[0] = max(peak[0], gm.rss_anon(pid))
    return time.monotonic() - start, n


def fault_server_ceiling(model):
    """Part 1."""
    with FaultServer({"/m.gguf": gm.read_file(model)}) as s:
        s.chunk = 256 << 10
        size = os.path.getsize(model)
        for n in (1, 8):
            mbs = concurrent_curls(s.url + "/m.gguf", size, n)
            print("fault server ceiling, no limits: %d curl reader%s at once: %.0f MB/s"
                  % (n, "s" if n > 1 else "", mbs))


def limited_read(model, raw_size):
    """Part 2."""
    with FaultServer({"/m.gguf": gm.read_file(model)}) as s:
        s.chunk = 256 << 10
        s.rate, s.latency = RATE, LATENCY
        secs, got = curl_range(s.url + "/m.gguf", 0, (16 << 20) - 1)
        one = got / secs / 1e6
        print("one connection, 25 MB/s + 50 ms a request: curl reads 16 MiB at %.1f MB/s"
              % one)
        with EnvMount(s.url + "/m.gguf") as m:
            s.clear_log()
            secs, n = read_all(m.p("tensors", "w.f32"))
            log = s.log_settled(1)
            in_flight = s.max_in_flight
        fetched = sum(r.bytes_sent for r in log)
        if os.environ.get("BENCH_DEBUG"):
            print([(r.range, r.bytes_sent >> 10) for r in log])
        rate = fetched / secs / 1e6
        print("cold .f32 of a 2048x32000 q4_K tensor (%.1f MB raw), 25 MB/s + 50 ms per "
              "connection:" % (raw_size / 1e6))
        print("  %.2f s: fetched %.1f MB at %.1f MB/s in %d requests (%d at most at once); "
              ".f32 %.0f MB/s" % (secs, fetched / 1e6, rate, len(log), in_flight, n / secs / 1e6))
        print("  fetched rate / one connection's: %.1fx measured (%.1f MB/s), %.1fx nominal "
              "(25 MB/s); target >= 4x (>= 100 MB/s)" % (rate / one, one, rate / 25.0))


def big_vocab_mount(directory):
    """Part 3."""
    path = os.path.join(directory, "big-vocab.gguf")
    header = rc.write_big_vocab(path)
    with FaultServer({"/v.gguf": gm.read_file(path)}) as s:
        s.chunk = 256 << 10
        s.rate, s.latency = RATE, LATENCY
        start = time.monotonic()
        with EnvMount(s.url + "/v.gguf") as m:
            secs = time.monotonic() - start
            log = s.log_settled(1)
            ok = os.path.getsize(m.p("metadata", "tokenizer.ggml.tokens")) > 0
    print("mount of a 151936-token vocabulary (%.1f MB header), 25 MB/s + 50 ms: %d "
          "requests (target <= 3), mounted in %.2f s%s"
          % (header / 1e6, len(log), secs, "" if ok else " (tokens missing!)"))


def nginx_compare(directory, model):
    """Part 4."""
    root = rc.public_root()
    try:
        shutil.copy(model, os.path.join(root, "m.gguf"))
        with Nginx(root) as n:
            with gm.Mount(model) as local:
                lsecs, ln = read_all(local.p("tensors", "w.f32"))
            with EnvMount(n.url + "/m.gguf") as m:
                peak = [gm.rss_anon(m.proc.pid)]
                rsecs, rn = read_all(m.p("tensors", "w.f32"), m.proc.pid, peak)
                peak[0] = max(peak[0], gm.rss_anon(m.proc.pid))
    finally:
        shutil.rmtree(root)
    assert ln == rn
    print("cold .f32 (%.0f MB), nginx on loopback without limits: remote %.2f s (%.0f MB/s), "
          "local mount %.2f s (%.0f MB/s): ratio %.2fx (target >= 0.5x)"
          % (rn / 1e6, rsecs, rn / rsecs / 1e6, lsecs, ln / lsecs / 1e6, lsecs / rsecs))
    print("  daemon's peak RssAnon during the read: %.1f MB; bound cache_size + 64 MB = %.0f MB"
          % (peak[0] / 1e6, (CACHE + (64 << 20)) / 1e6))


def bdi_readahead(mountpoint, kb=None):
    """The mount's read_ahead_kb (its bdi is its st_dev), written first when kb is given."""
    dev = os.stat(mountpoint).st_dev
    path = "/sys/class/bdi/%d:%d/read_ahead_kb" % (os.major(dev), os.minor(dev))
    if kb is not None:
        with open(path, "w") as f:
            f.write("%d\n" % kb)
    with open(path) as f:
        return int(f.read())


def mmap_fetches(directory):
    """Part 5."""
    root = rc.public_root()
    rows, cols = 4096, 4096
    try:
        raw = numpy.random.default_rng(5).standard_normal(rows * cols, dtype=numpy.float32)
        gm.write_gguf(os.path.join(root, "m.gguf"), [("general.architecture", "llama")],
                      [("w", [cols, rows], 0, raw.tobytes())])
        row = 100

        def pread(p):
            fd = os.open(os.path.join(p, "tensors", "w"), os.O_RDONLY)
            try:
                os.pread(fd, 16384, row * cols * 4)
            finally:
                os.close(fd)

        def load(p):
            a = numpy.load(os.path.join(p, "tensors", "w.npy"), mmap_mode="r")
            assert numpy.array_equal(a[row, :4], raw[row * cols:row * cols + 4])

        def memmap(p):
            a = numpy.memmap(os.path.join(p, "tensors", "w"), dtype=numpy.float32, mode="r")
            assert numpy.array_equal(a[row * cols:row * cols + 4], raw[row * cols:row * cols + 4])

        def sequential(p):
            secs, n = read_all(os.path.join(p, "model.gguf"))
            return " (%.0f MB/s)" % (n / secs / 1e6)
        with Nginx(root) as n:
            for kb in [None if k == "-" else int(k) for k in os.environ.get("BENCH_RA_KB", "-,4096").split(",")]:
                figures = {}
                for name, fn in (("pread 16 KiB", pread), ("np.load mmap", load),
                                 ("np.memmap", memmap), ("model.gguf read", sequential)):
                    with EnvMount(n.url + "/m.gguf") as m:
                        time.sleep(0.5)   # after the daemon's own write, if any
                        ra = bdi_readahead(m.path, kb)
                        before = int(os.getxattr(m.path, "user.ggufs.bytes_fetched"))
                        note = fn(m.path) or ""
                        got = int(os.getxattr(m.path, "user.ggufs.bytes_fetched")) - before
                        figures[name] = got
                        if name == "model.gguf read":
                            print("  read_ahead_kb %d: model.gguf sequential read%s"
                                  % (ra, note))
                base = figures["pread 16 KiB"]
                print("  read_ahead_kb %d: fetched for one row: pread 16 KiB %d KiB, "
                      "np.load mmap %d KiB (%.1fx), np.memmap %d KiB (%.1fx) (target <= 4x)"
                      % (ra, base >> 10, figures["np.load mmap"] >> 10,
                         figures["np.load mmap"] / base, figures["np.memmap"] >> 10,
                         figures["np.memmap"] / base))
    finally:
        shutil.rmtree(root)


def main():
    gm.setup()
    directory = tempfile.mkdtemp(prefix="ggufs-bench-")
    try:
        model = os.path.join(directory, "q4k.gguf")
        raw = write_q4k_model(model)
        print("load average at start: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
        only = os.environ.get("BENCH_ONLY")  # one part by name, while tuning
        if only in (None, "ceiling"):
            fault_server_ceiling(model)
        if only in (None, "limited"):
            limited_read(model, raw)
        if only in (None, "mount"):
            big_vocab_mount(directory)
        if only in (None, "nginx"):
            nginx_compare(directory, model)
        if only in (None, "mmap"):
            mmap_fetches(directory)
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
