#!/usr/bin/env python3
"""model.gguf's speed (issue 18), printed, never asserted: `meson test --benchmark`.

    python3 bench_modelfile.py GGUFS_BINARY

On a llama model generated here from the bundled one's metadata, scaled up to 1024 wide,
8 layers, q8_0 (about 113 MB; llama.cpp loads it and completes a prompt):
1. local, cold page cache (the .gguf dropped with POSIX_FADV_DONTNEED, a fresh mount
   each time): a whole read of model.gguf against every raw tensor file read in file
   order (target >= 0.9x), and the same split in 4 shards (merged model.gguf against the
   shards' raw tensor files, target >= 0.9x);
2. llama.cpp's loadModel (node-llama-cpp) of model.gguf through a local mount against
   the file itself, cold, with mmap and with --no-mmap (target <= 2x), and which reads
   reach the daemon;
3. remote, on the fault server with 25 MB/s and 50 ms per connection: a cold whole read
   of model.gguf, fetched bytes per second against one connection's (target >= 5x) and
   against the raw tensor files; loadModel with mmap and without next to
   size / (8 x 25 MB/s); then with -o cache_dir, a second mount's load and how many
   data requests it makes (target 0); and a cold read of the merged model.gguf of the
   model split in 4 shards served by URL.
Skips the llama.cpp parts without node-llama-cpp (tests/llama: npm ci)."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "remote"))

import numpy  # noqa: E402

import remote_common as rc  # noqa: E402
from remote_common import EnvMount, FaultServer, gm  # noqa: E402

LLAMA = os.path.join(HERE, "..", "llama")
RATE = 25_000_000
LATENCY = 0.05
PIECE = 1 << 20
GGML_F32, GGML_Q8_0 = 0, 8
EMBD, FF, LAYERS, HEADS, KV_HEADS, VOCAB = 1024, 2816, 8, 16, 4, 8000
TRIES = 3


def patch_u32(kv, value):
    """A key-value encoding of a uint32 with its value replaced."""
    assert struct.unpack_from("<I", kv, len(kv) - 8)[0] == 4  # GGUF_TYPE_UINT32
    return kv[:-4] + struct.pack("<I", value)


def write_llama(path):
    """A loadable llama model: the bundled one's metadata (tokenizer included) with the
    sizes above, q8_0 weights of random quants and small scales, f32 norms of 1."""
    kv_bytes, _, _, _ = rc.parse_gguf(gm.read_file(gm.TINY))
    new = {"llama.embedding_length": EMBD, "llama.feed_forward_length": FF,
           "llama.block_count": LAYERS, "llama.attention.head_count": HEADS,
           "llama.attention.head_count_kv": KV_HEADS,
           "llama.rope.dimension_count": EMBD // HEADS, "general.file_type": 7}
    kvs = []
    for kv in kv_bytes:
        n = struct.unpack_from("<Q", kv)[0]
        key = kv[8:8 + n].decode()
        kvs.append(patch_u32(kv, new[key]) if key in new else kv)
    tensors = [("output.weight", [EMBD, VOCAB]), ("output_norm.weight", [EMBD]),
               ("token_embd.weight", [EMBD, VOCAB])]
    for b in range(LAYERS):
        for name, dims in (("attn_k", [EMBD, EMBD // HEADS * KV_HEADS]), ("attn_norm", [EMBD]),
                           ("attn_output", [EMBD, EMBD]), ("attn_q", [EMBD, EMBD]),
                           ("attn_v", [EMBD, EMBD // HEADS * KV_HEADS]), ("ffn_down", [FF, EMBD]),
                           ("ffn_gate", [EMBD, FF]), ("ffn_norm", [EMBD]), ("ffn_up", [EMBD, FF])):
            tensors.append(("blk.%d.%s.weight" % (b, name), dims))
    rng = numpy.random.default_rng(7)
    infos, blobs, off = b"", [], 0
    for name, dims in tensors:
        n = int(numpy.prod(dims))
        if len(dims) == 1:
            ttype, blob = GGML_F32, numpy.ones(n, numpy.float32).tobytes()
        else:
            ttype = GGML_Q8_0
            blocks = numpy.empty((n // 32, 34), numpy.uint8)
            blocks[:, :2] = numpy.frombuffer(numpy.float16(0.002).tobytes(), numpy.uint8)
            blocks[:, 2:] = rng.integers(0, 256, size=(n // 32, 32), dtype=numpy.uint8)
            blob = blocks.tobytes()
        infos += rc.gguf_str(name) + struct.pack("<I", len(dims))
        infos += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ttype, off)
        blobs.append(blob)
        off += len(blob) + (-len(blob) % 32)
    with open(path, "wb") as f:
        head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + infos
        f.write(head + b"\0" * (-len(head) % 32))
        for blob in blobs:
            f.write(blob + b"\0" * (-len(blob) % 32))
    return os.path.getsize(path)


def read_whole(paths):
    """Reads every file of paths in PIECE reads, in order: (seconds, bytes)."""
    n = 0
    start = time.monotonic()
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while True:
                b = f.read(PIECE)
                if not b:
                    break
                n += len(b)
    return time.monotonic() - start, n


def raw_files(root):
    """The raw tensor files of the mount at root, in file order."""
    with open(os.path.join(root, "gguf.json")) as f:
        return [os.path.join(root, t["file"]) for t in json.load(f)["tensors"]]


def best_rate(model, shards, which):
    """The best MB/s of TRIES cold reads of model.gguf ('model') or the raw tensor files
    ('raw') through a fresh local mount of model, and the daemon's RssAnon growth over
    the read."""
    best, grew = 0.0, 0
    for _ in range(TRIES):
        with gm.Mount(model) as m:
            for s in shards:
                gm.drop_pages(s)
            paths = [m.p("model.gguf")] if which == "model" else raw_files(m.path)
            before = gm.rss_anon(m.proc.pid)
            secs, n = read_whole(paths)
            grew = max(grew, gm.rss_anon(m.proc.pid) - before)
        best = max(best, n / secs / 1e6)
    return best, grew


def local_reads(model, shards, label):
    """Part 1 for one model (its shards: the files to drop)."""
    mf, grew = best_rate(model, shards, "model")
    raw, _ = best_rate(model, shards, "raw")
    print("%s, cold: model.gguf %.0f MB/s, raw tensor files %.0f MB/s: %.2fx (target >= 0.9x); "
          "the daemon's RssAnon grew %.1f MB over a whole read of model.gguf"
          % (label, mf, raw, mf / raw, grew / 1e6))


def llama_ready():
    return shutil.which("node") and os.path.isdir(os.path.join(LLAMA, "node_modules",
                                                                "node-llama-cpp"))


def load_ms(path, mmap, before=None):
    """loadModel's milliseconds for path in a fresh node (before() runs first)."""
    if before:
        before()
    r = subprocess.run(["node", os.path.join(LLAMA, "greedy.mjs"), "--load-only"] +
                       ([] if mmap else ["--no-mmap"]) + [path], cwd=LLAMA,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=600, check=True)
    return json.loads(r.stdout.decode().splitlines()[-1])["load_ms"]


def local_loads(model):
    """Part 2."""
    for mmap in (True, False):
        direct = min(load_ms(model, mmap, lambda: gm.drop_pages(model)) for _ in range(TRIES))
        mounted = []
        for _ in range(TRIES):
            with gm.Mount(model) as m:
                mounted.append(load_ms(m.p("model.gguf"), mmap, lambda: gm.drop_pages(model)))
        print("loadModel, cold, %s: the file %.0f ms, through a local mount %.0f ms: %.2fx "
              "(target <= 2x)" % ("mmap" if mmap else "--no-mmap", direct, min(mounted),
                                 min(mounted) / direct))


def fetched(log):
    return sum(r.bytes_sent for r in log)


def remote(model, size):
    """Part 3."""
    data = gm.read_file(model)
    with FaultServer({"/m.gguf": data}) as s:
        s.chunk = 256 << 10
        s.rate, s.latency = RATE, LATENCY
        secs, got = rc_curl(s.url + "/m.gguf", 16 << 20)
        one = got / secs / 1e6
        print("remote, 25 MB/s + 50 ms per connection; one connection (curl, 16 MiB): %.1f MB/s"
              % one)
        for which in ("model", "raw"):
            with EnvMount(s.url + "/m.gguf") as m:
                s.clear_log()
                paths = [m.p("model.gguf")] if which == "model" else raw_files(m.path)
                secs, n = read_whole(paths)
                rss = gm.rss_anon(m.proc.pid)
                log = s.log_settled(1)
                rate = fetched(log) / secs / 1e6
                print("  cold read of %s (%.0f MB): %.2f s, fetched %.0f MB/s in %d requests "
                      "(%d at once): %.1fx one connection (target >= 5x); daemon RssAnon %.0f MB"
                      % ("model.gguf" if which == "model" else "the raw tensor files", n / 1e6,
                         secs, rate, len(log), s.max_in_flight, rate / one, rss / 1e6))
        if not llama_ready():
            print("  (node-llama-cpp not installed: no loadModel figures)")
            return
        ideal = size / (8 * RATE) * 1000
        for mmap in (True, False):
            with EnvMount(s.url + "/m.gguf") as m:
                s.clear_log()
                ms = load_ms(m.p("model.gguf"), mmap)
                log = s.log_settled(1)
                lens = [rc.range_length(r.range) for r in log if r.range]
                print("  loadModel %s: %.0f ms (size / (8 x 25 MB/s) = %.0f ms): %d requests, "
                      "largest %d KiB, %d at once"
                      % ("mmap" if mmap else "--no-mmap", ms, ideal, len(log),
                         max(lens) >> 10 if lens else 0, s.max_in_flight))
        cache = tempfile.mkdtemp(prefix="ggufs-bench-cache-")
        try:
            opts = ["-o", "cache_dir=" + cache]
            with EnvMount(s.url + "/m.gguf", opts) as m:
                first = load_ms(m.p("model.gguf"), True)
            s.clear_log()
            with EnvMount(s.url + "/m.gguf", opts) as m:
                at_mount = len(s.log_settled(1))
                second = load_ms(m.p("model.gguf"), True)
            log = s.log_settled(1)
            print("  -o cache_dir: first load %.0f ms, second mount's load %.0f ms; requests "
                  "at its mount %d, tensor-data requests during the load %d (target 0)"
                  % (first, second, at_mount, len(log) - at_mount))
        finally:
            shutil.rmtree(cache)


def remote_split(shards):
    """Part 3 for the model split in 4: a cold whole read of the merged model.gguf, each
    shard its own file on the server (and its own read-ahead in the daemon)."""
    files = {"/" + os.path.basename(p): gm.read_file(p) for p in shards}
    with FaultServer(files) as s:
        s.chunk = 256 << 10
        s.rate, s.latency = RATE, LATENCY
        secs, got = rc_curl(s.url + "/" + os.path.basename(shards[0]), 16 << 20)
        one = got / secs / 1e6
        with EnvMount(s.url + "/" + os.path.basename(shards[0])) as m:
            s.clear_log()
            secs, n = read_whole([m.p("model.gguf")])
            log = s.log_settled(1)
        rate = fetched(log) / secs / 1e6
        print("  split in 4, cold read of the merged model.gguf (%.0f MB): %.2f s, fetched "
              "%.0f MB/s in %d requests (%d at once): %.1fx one connection"
              % (n / 1e6, secs, rate, len(log), s.max_in_flight, rate / one))


def rc_curl(url, length):
    start = time.monotonic()
    r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download}",
                        "-r", "0-%d" % (length - 1), url], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=300, check=True)
    return time.monotonic() - start, int(r.stdout)


def main():
    gm.setup()
    directory = tempfile.mkdtemp(prefix="ggufs-bench-mf-", dir=os.environ.get("BENCH_DIR"))
    try:
        model = os.path.join(directory, "llama.gguf")
        size = write_llama(model)
        print("model: %s, %.1f MB; load average at start: %s" % (
            os.path.basename(model), size / 1e6,
            " ".join(open("/proc/loadavg").read().split()[:3])))
        only = os.environ.get("BENCH_ONLY")
        if only in (None, "local"):
            local_reads(model, [model], "local, one file")
            shards = rc.split_gguf(model, directory, "split", 4)
            local_reads(shards[0], shards, "local, split in 4")
        if only in (None, "load"):
            if llama_ready():
                local_loads(model)
            else:
                print("(node-llama-cpp not installed: no loadModel figures)")
        if only in (None, "remote"):
            remote(model, size)
            remote_split(rc.split_gguf(model, directory, "rsplit", 4))
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
