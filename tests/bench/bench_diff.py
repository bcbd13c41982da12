#!/usr/bin/env python3
"""ggufs --diff's speed (issue 27), printed, never asserted: `meson test --benchmark diff`.

    python3 bench_diff.py GGUFS_BINARY [LOCAL_GB | remote]

1. Local: two generated q8_0 models of LOCAL_GB (4) GB each, same names and dims, other
   random quants. `ggufs --diff A B` cold (both files' pages dropped with
   posix_fadvise(DONTNEED)) and warm (right after, from the page cache; the fastest of
   BENCH_DIFF_WARM_RUNS, 3): GB/s of A+B per
   wall second and per CPU second (user + system of the process), and its peak RssAnon
   (target < 256 MB); against `ggufs --check` of A then of B (the health counts) and
   `ggufs --check --json` (every figure) measured the same way (target: --diff at least
   0.5x the rate of --check over both).
2. Remote: two generated 100 MB q8_0 models served by the fault server of tests/remote
   with each connection limited to 25 MB/s and 50 ms added to every request:
   `ggufs --diff URL_A URL_B`: bytes fetched (the server's count) per wall second,
   against one connection's rate measured with curl (target >= 4x), and the requests.

The models are written here, in a temporary directory removed at the end (about
2 x LOCAL_GB GB of disk)."""
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "remote"))

import numpy  # noqa: E402

from remote_common import FaultServer, gm  # noqa: E402

GGML_Q8_0 = 8
Q8_0_BYTES = 34                   # per block of 32 values
NE0, NE1 = 4096, 14336            # one ffn-sized tensor: 58.7 M values, 62 MB of q8_0
RATE = 25_000_000                 # bytes/s per connection
LATENCY = 0.05                    # seconds per request
EXTRA = os.environ.get("BENCH_DIFF_OPTS", "").split()
# warm runs of each command, the fastest kept: other work on the machine only slows one
WARM_RUNS = int(os.environ.get("BENCH_DIFF_WARM_RUNS", "3"))


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_q8_model(path, n_tensors, ne1, seed):
    """A GGUF of n_tensors q8_0 tensors of NE0 x ne1, valid blocks (scale 0.01, random
    quants from seed), written a piece at a time. Returns the file's size."""
    rng = numpy.random.default_rng(seed)
    blocks_per_tensor = NE0 * ne1 // 32
    piece = rng.integers(-128, 128, size=(1 << 20, Q8_0_BYTES), dtype=numpy.int8).view(numpy.uint8)
    piece[:, 0:2] = numpy.frombuffer(numpy.float16(0.01).tobytes(), numpy.uint8)
    piece = piece.tobytes()
    size = blocks_per_tensor * Q8_0_BYTES
    assert size % 32 == 0
    head = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, 1)
    head += gguf_string("general.architecture") + struct.pack("<I", 8) + gguf_string("llama")
    for k in range(n_tensors):
        head += gguf_string("blk.%d.ffn_up.weight" % k) + struct.pack("<IQQIQ", 2, NE0, ne1,
                                                                       GGML_Q8_0, k * size)
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head)
        for k in range(n_tensors):
            left, at = size, (k * 7919 * Q8_0_BYTES) % len(piece)
            while left:
                n = min(left, len(piece) - at)
                f.write(piece[at:at + n])
                left -= n
                at = 0
    return os.path.getsize(path)


def run_measured(args):
    """Runs GGUFS args to its end: (wall s, CPU s, peak RssAnon bytes, exit status)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.Popen([gm.GGUFS] + args, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while p.poll() is None:
        try:
            peak = max(peak, gm.rss_anon(p.pid))
        except (OSError, AssertionError):
            pass
        time.sleep(0.01)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    err = p.stderr.read()
    if p.returncode not in (0, 1):
        raise SystemExit("ggufs %s: exit %d: %s" % (" ".join(args), p.returncode, err.decode()))
    return wall, cpu, peak, p.returncode


def local(tmp, gb):
    n_tensors = max(1, int(round(gb * 1e9 / (NE0 * NE1 // 32 * Q8_0_BYTES))))
    a, b = os.path.join(tmp, "a.gguf"), os.path.join(tmp, "b.gguf")
    t0 = time.monotonic()
    size = write_q8_model(a, n_tensors, NE1, 1) + write_q8_model(b, n_tensors, NE1, 2)
    print("local: two q8_0 models of %d tensors %dx%d, %.2f GB each (written in %.0f s)"
          % (n_tensors, NE0, NE1, size / 2e9, time.monotonic() - t0))
    runs = {
        "--diff": [["--diff", a, b]],
        "--check (both)": [["--check", a], ["--check", b]],
        "--check --json (both)": [["--check", "--json", a], ["--check", "--json", b]],
    }
    rates = {}
    for what, commands in runs.items():
        for state in ("cold", "warm"):
            best = None
            for _ in range(1 if state == "cold" else WARM_RUNS):
                if state == "cold":
                    gm.drop_pages(a)
                    gm.drop_pages(b)
                wall = cpu = 0.0
                peak = 0
                for args in commands:
                    w, c, p, _ = run_measured(args)
                    wall, cpu, peak = wall + w, cpu + c, max(peak, p)
                if best is None or wall < best[0]:
                    best = (wall, cpu, peak)
            wall, cpu, peak = best
            rates[(what, state)] = size / wall
            print("  %-22s %s: %.2f s wall, %.2f s CPU: %.2f GB/s of A+B per wall second, "
                  "%.2f GB/s per CPU second; peak RssAnon %.1f MB"
                  % (what, state, wall, cpu, size / wall / 1e9, size / cpu / 1e9, peak / 1e6))
    for state in ("cold", "warm"):
        print("  %s: --diff at %.2fx the rate of --check over both, %.2fx --check --json"
              % (state, rates[("--diff", state)] / rates[("--check (both)", state)],
                 rates[("--diff", state)] / rates[("--check --json (both)", state)]))
    os.unlink(a)
    os.unlink(b)


def curl_rate(url, length):
    """One connection's rate: bytes/s of a curl range read of length bytes."""
    t0 = time.monotonic()
    r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download}",
                        "-r", "0-%d" % (length - 1), url], capture_output=True, check=True)
    return int(r.stdout) / (time.monotonic() - t0)


def refetched(log):
    """Bytes of the answered range requests that another request of the same file
    also asked for."""
    import re
    by_path = {}
    for r in log:
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", r.range or "")
        if r.status == 206 and m:
            by_path.setdefault(r.path, []).append((int(m.group(1)), int(m.group(2)) + 1))
    again = 0
    for spans in by_path.values():
        end = 0
        for a, b in sorted(spans):
            again += max(0, min(b, end) - a)
            end = max(end, b)
    return again


def remote(tmp):
    ne1 = 768          # 4096 x 768 values of q8_0: 3.3 MB a tensor...
    n_tensors = 30     # ... and 30 of them: 100 MB
    n_tensors = int(os.environ.get("BENCH_DIFF_REMOTE_TENSORS", n_tensors))
    a, b = os.path.join(tmp, "ra.gguf"), os.path.join(tmp, "rb.gguf")
    size = write_q8_model(a, n_tensors, ne1, 3) + write_q8_model(b, n_tensors, ne1, 4)
    files = {"/a.gguf": gm.read_file(a), "/b.gguf": gm.read_file(b)}
    print("remote: two q8_0 models of %.0f MB each, each connection at %d MB/s + %d ms per "
          "request" % (size / 2e6, RATE // 1000000, LATENCY * 1000))
    with FaultServer(files) as s:
        s.rate = RATE
        s.latency = LATENCY
        t0 = time.monotonic()
        r = gm.run_ggufs(["--diff"] + EXTRA + [s.url + "/a.gguf", s.url + "/b.gguf"], timeout=900)
        wall = time.monotonic() - t0
        if r.returncode != 0:
            raise SystemExit("remote --diff failed: %s" % r.stderr.decode())
        log = s.log_settled()
        fetched = sum(x.bytes_sent for x in log)
        again = refetched(log)
        one = curl_rate(s.url + "/a.gguf", 8 << 20)
        print("  one connection (curl, 8 MiB): %.1f MB/s" % (one / 1e6))
        print("  --diff by URL: %.1f s, %d requests (at most %d at once), %.0f MB fetched "
              "(%.2fx the two files), %.1f MB/s fetched: %.1fx one connection, %.1fx the "
              "nominal 25 MB/s" % (wall, len(log), s.max_in_flight, fetched / 1e6,
                                    fetched / size, fetched / wall / 1e6, fetched / wall / one,
                                    fetched / wall / RATE))
        print("  bytes asked for twice (ranges of one file that overlap): %d" % again)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    gm.GGUFS = os.path.abspath(sys.argv[1])
    arg = sys.argv[2] if len(sys.argv) > 2 else "4"
    with open("/proc/loadavg") as f:
        print("load average: %s" % " ".join(f.read().split()[:3]))
    tmp = tempfile.mkdtemp(prefix="ggufs-bench-diff-")
    try:
        if arg != "remote":
            local(tmp, float(arg))
        remote(tmp)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
