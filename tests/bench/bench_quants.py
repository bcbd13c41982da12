#!/usr/bin/env python3
"""quants/NAME.gguf against llama.cpp's own quantizer (issue 36), printed, never
asserted: `meson test --benchmark quants`.

    python3 bench_quants.py GGUFS_BINARY

Anchor: llama_model_quantize() of the libllama that tests/llama pins, through ctypes, at
nthread 1 and 2, on the same model on the same machine. Models: a ~430 MB F16 llama of
random weights (4 blocks, n_embd 2048, ff 5632, GQA 16/4, 8,000 tokens; made here with
the tests' generator) and the bundled model rewritten as F16 by llama.cpp. NAMEs: Q8_0,
Q6_K, Q4_K_M, IQ4_XS, Q2_K (BENCH_NAMES=... for others; BENCH_MODELS=tiny for one
model). Per model and NAME:

- llama.cpp 1 thread: its CPU seconds (this process's, the call runs here) and the
  output's bytes per CPU second; 2 threads: wall seconds;
- ggufs cold: `cat quants/NAME.gguf` through a fresh mount with an empty disk cache:
  wall seconds, the daemon's CPU seconds (/proc/PID/stat), output bytes per daemon CPU
  second and its ratio to llama.cpp's single-thread rate (target >= 1.0), the wall
  against llama.cpp's 2-thread wall (target <= 1.1);
- ggufs from the disk cache: a second mount of the same cache, the file's pages and the
  cache's dropped first (POSIX_FADV_DONTNEED), `cat` wall against `cat` of llama.cpp's
  output file of the same size, dropped too; and whether its sha256 is llama.cpp's;
- the daemon's peak RssAnon (sampled every 20 ms) over both mounts;
- for Q4_K_M, the first 4 KiB read in the middle of a fresh mount's file (open and
  pread, the plans made by that open included).
The machine's load average is printed with each line: on a shared machine the wall
figures move with it, the CPU figures less."""
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

NAMES = os.environ.get("BENCH_NAMES", "Q8_0 Q6_K Q4_K_M IQ4_XS Q2_K").split()
MODELS = os.environ.get("BENCH_MODELS", "rand tiny").split()
TICK = os.sysconf("SC_CLK_TCK")


def daemon_cpu(pid):
    """CPU seconds (user + system) of process pid so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def cat(path):
    """Wall seconds of `cat path > /dev/null`."""
    t = time.monotonic()
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
    return time.monotonic() - t


def load():
    return os.getloadavg()[0]


def llama_run(llama, src, out, ftype, nthread):
    """(wall, this process's CPU) seconds of llama_model_quantize at nthread."""
    p = llama.lib.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = nthread
    import ctypes
    w, c = time.monotonic(), time.process_time()
    r = llama.lib.llama_model_quantize(src.encode(), out.encode(), ctypes.byref(p))
    w, c = time.monotonic() - w, time.process_time() - c
    if r != 0:
        raise RuntimeError("llama_model_quantize failed")
    return w, c


def bench_name(llama, work, label, model, name):
    ref = os.path.join(work, "ref-%s.gguf" % name)
    w1, c1 = llama_run(llama, model, ref, qp.FTYPE[name], 1)
    w2, _ = llama_run(llama, model, ref, qp.FTYPE[name], 2)
    size = os.path.getsize(ref)
    want = qp.sha256_file(ref)
    rate1 = size / c1
    cache = os.path.join(work, "cache-%s-%s" % (label, name))
    opts = ["-o", "cache_dir=" + cache]
    with gm.Mount(model, opts) as m, gm.Peak(m.proc.pid) as peak:
        path = m.p("quants", name + ".gguf")
        os.stat(path)   # the plans, before the clock
        cpu0 = daemon_cpu(m.proc.pid)
        cold = cat(path)
        cpu = daemon_cpu(m.proc.pid) - cpu0
        peak1 = peak.rss
    entry = [os.path.join(cache, e, "data") for e in os.listdir(cache)
             if os.path.isdir(os.path.join(cache, e))]
    for f in entry + [ref]:
        gm.drop_pages(f)
    with gm.Mount(model, opts) as m, gm.Peak(m.proc.pid) as peak:
        path = m.p("quants", name + ".gguf")
        os.stat(path)
        cpu0 = daemon_cpu(m.proc.pid)
        warm = cat(path)
        cpu_disk = daemon_cpu(m.proc.pid) - cpu0
        same = qp.sha256_file(path) == want
        from_disk = int(os.getxattr(path, "user.ggufs.blocks_from_disk"))
        peak2 = peak.rss
    local = cat(ref)
    print("%-8s %-7s %7.1f MB | llama 1t %6.2f s cpu %6.1f MB/s, 2t %6.2f s wall | "
          "ggufs cold %6.2f s wall, %6.2f s cpu %6.1f MB/s = %4.2fx 1t, wall %4.2fx 2t | "
          "disk cache %5.2f s (%4.2f s cpu, %d blocks) vs local file %5.2f s = %4.2fx%s | "
          "peak anon %5.1f MB | load %.1f"
          % (label, name, size / 1e6, c1, rate1 / 1e6, w2, cold, cpu, size / cpu / 1e6 if cpu else 0,
             (size / cpu) / rate1 if cpu else 0, cold / w2, warm, cpu_disk, from_disk, local,
             warm / local if local else 0, "" if same else " SHA256 DIFFERS", max(peak1, peak2) / 1e6,
             load()), flush=True)
    os.unlink(ref)
    shutil.rmtree(cache)


def middle_read(work, label, model):
    """Seconds to open a fresh mount's Q4_K_M and read 4 KiB in its middle."""
    with gm.Mount(model, ["-o", "cache_dir=" + os.path.join(work, "cache-mid")]) as m:
        path = m.p("quants", "Q4_K_M.gguf")
        t = time.monotonic()
        fd = os.open(path, os.O_RDONLY)
        size = os.fstat(fd).st_size
        t_open = time.monotonic() - t
        os.pread(fd, 4096, size // 2)
        t_all = time.monotonic() - t
        os.close(fd)
        computed = int(os.getxattr(path, "user.ggufs.blocks_computed"))
    shutil.rmtree(os.path.join(work, "cache-mid"))
    print("%-8s Q4_K_M  first 4 KiB at the middle of a fresh mount: %.3f s (open and stat "
          "%.3f s), %d blocks of 128 KiB computed | load %.1f"
          % (label, t_all, t_open, computed, load()), flush=True)


def main():
    gm.setup()
    lib = qp.find_libllama()
    if not lib:
        print("libllama of node-llama-cpp is not installed: skipping", file=sys.stderr)
        sys.exit(77)
    llama = qp.Llama(lib)
    work = tempfile.mkdtemp(prefix="ggufs-bench-quants-")
    try:
        big = os.path.join(work, "rand-2048.gguf")
        if "rand" in MODELS:
            qp.random_llama(big, seed=36, n_embd=2048, n_ff=5632, n_layer=4, n_head=16,
                            n_head_kv=4, n_vocab=8000, gtype=qp.F16)
        tiny = os.path.join(work, "tiny-F16.gguf")
        if llama.quantize(qp.TINY, tiny, 1, requantize=True) != 0:
            raise RuntimeError("no F16 rewrite of the bundled model")
        print("models: rand-2048 %.0f MB F16 (random, 4 blocks, n_embd 2048, ff 5632), "
              "tiny %.1f MB (the bundled model as F16); %d cores"
              % (os.path.getsize(big) / 1e6 if os.path.exists(big) else 0,
                 os.path.getsize(tiny) / 1e6, os.cpu_count()), flush=True)
        for label, model in (("rand", big), ("tiny", tiny)):
            if label not in MODELS:
                continue
            middle_read(work, label, model)
            for name in NAMES:
                bench_name(llama, work, label, model, name)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
