#!/usr/bin/env python3
"""Metadata edits' speed (issue 19), printed, never asserted: `meson test --benchmark`.

    python3 bench_edits.py GGUFS_BINARY

On a 4 GiB model made here (the bundled model's metadata, a 32000-token vocabulary and
a chat template, then one 4 GiB int8 tensor in a sparse file, so it costs no disk):
1. `cp model.gguf /dev/null` through a fresh mount without edits, and through a fresh
   mount with -o edits=FILE after tokenizer.chat_template was rewritten (target: the
   same time: an edit costs what the header costs);
2. the latency of one edit of a 64 KiB chat template (open with O_TRUNC, write, close,
   which returns once FILE is on disk and every view shows it), median and worst of 20
   (target: well under 50 ms, whatever the model's size);
3. what one edit costs as the metadata grows (issue 24 item 9): models of 1,000, 10,000
   and 100,000 uint32 keys and one small tensor, the median of 10 edits of one key, the
   daemon's memory per state held by an open file (one gguf.json reader opened before
   each of 10 edits, RSS growth / 10), and the mount itself (ggufs started to mounted,
   FILE loading an edit of every 10th key);
4. what a held state costs as the tensors grow (issue 24 item 9): models of 1,000, 10,000
   and 100,000 small f32 tensors and a few keys, the daemon's memory per state held by an
   open file (as in 3) and the median of 10 edits of one key.
The daemon's CPU per edit (its threads' schedstat over the 10 edits) says what an edit
costs on a loaded machine, where the wall time is mostly waiting (fsync, the scheduler).
Memory per held state is the RSS growth over 10 edits with a gguf.json reader opened
before each, less that of 10 readers of one state, over 10.
BENCH_EDITS_ONLY=keys|tensors runs only that section (and skips 1 and 2)."""
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mount"))
import ggufs_mount as gm  # noqa: E402

SIZE = 4 << 30
GGML_I8 = 24


def make_model(path):
    """The bundled model's keys (tokens, template and all) and one int8 tensor of SIZE
    bytes, whose data is a hole."""
    data = gm.read_file(gm.TINY)
    n_t, n_kv = struct.unpack_from("<QQ", data, 8)
    # the keys end where the first tensor info starts: walk them as ggufs does
    off = 24
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_value(o, t):
        if t == 8:
            (n,) = struct.unpack_from("<Q", data, o)
            return o + 8 + n
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, o)
            o += 12
            for _ in range(n):
                o = skip_value(o, et)
            return o
        return o + sizes[t]
    for _ in range(n_kv):
        (n,) = struct.unpack_from("<Q", data, off)
        off += 8 + n
        (t,) = struct.unpack_from("<I", data, off)
        off = skip_value(off + 4, t)
    kvs = data[24:off]
    name = b"big.weight"
    hdr = b"GGUF" + struct.pack("<IQQ", 3, 1, n_kv) + kvs
    hdr += struct.pack("<Q", len(name)) + name + struct.pack("<IQ", 1, SIZE)
    hdr += struct.pack("<IQ", GGML_I8, 0)
    hdr += b"\0" * (-len(hdr) % 32)
    with open(path, "wb") as f:
        f.write(hdr)
        f.truncate(len(hdr) + SIZE)


def cp_time(path):
    t0 = time.monotonic()
    subprocess.run(["cp", path, "/dev/null"], check=True)
    return time.monotonic() - t0


def edit(path, text):
    t0 = time.monotonic()
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, text)
    os.close(fd)
    return time.monotonic() - t0


def keys_model(path, n):
    """A GGUF of n uint32 keys k.000000 ... and one 32-element f32 tensor."""
    kv = b"".join(struct.pack("<Q", 8) + b"k.%06d" % i + struct.pack("<II", 4, i) for i in range(n))
    name = b"t.weight"
    hdr = b"GGUF" + struct.pack("<IQQ", 3, 1, n) + kv
    hdr += struct.pack("<Q", len(name)) + name + struct.pack("<IQ", 1, 32) + struct.pack("<IQ", 0, 0)
    hdr += b"\0" * (-len(hdr) % 32)
    with open(path, "wb") as f:
        f.write(hdr + b"\0" * 128)


def tensors_model(path, n):
    """A GGUF of 3 uint32 keys and n f32 tensors of 8 elements blk.N.ffn_up.weight, each
    with a .f32, a .npy and a stats file."""
    kv = b"".join(struct.pack("<Q", 8) + b"k.%06d" % i + struct.pack("<II", 4, i) for i in range(3))
    ti = b""
    for i in range(n):
        name = b"blk.%d.ffn_up.weight" % i
        ti += struct.pack("<Q", len(name)) + name + struct.pack("<IQ", 1, 8) + struct.pack("<IQ", 0, 32 * i)
    hdr = b"GGUF" + struct.pack("<IQQ", 3, n, 3) + kv + ti
    hdr += b"\0" * (-len(hdr) % 32)
    with open(path, "wb") as f:
        f.write(hdr)
        f.truncate(len(hdr) + 32 * n)


def cpu_ns(pid):
    """The CPU time the daemon's threads have taken, in ns (schedstat)."""
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def held_and_edit(m, k, rounds=10):
    """The median of rounds edits of key file k, and the daemon's memory per state held
    by an open gguf.json: the RSS growth over rounds edits, each after a reader opened,
    less that of as many readers of one state (what an open file and the daemon's
    threads cost without a state of its own, once those threads are made), over
    rounds."""
    cpu0 = cpu_ns(m.proc.pid)
    times = [edit(k, b"%d\n" % (7 + i)) for i in range(rounds)]
    cpu_ms = (cpu_ns(m.proc.pid) - cpu0) / rounds / 1e6

    def readers_rss(edit_between):
        base = gm.proc_status(m.proc.pid, "VmRSS", gone=0) // 1024
        readers = []
        for i in range(rounds):
            readers.append(open(m.p("gguf.json"), "rb"))
            readers[-1].read(1)
            if edit_between:
                edit(k, b"%d\n" % (100 + i))
        grown = gm.proc_status(m.proc.pid, "VmRSS", gone=0) // 1024 - base
        for r in readers:
            r.close()
        return grown
    readers_rss(False)   # the daemon's threads and buffers, made once
    same = readers_rss(False)
    held = (readers_rss(True) - same) / rounds
    return times, held, cpu_ms


def tensors_cost(d):
    """Section 4: per held state and per edit, at 1k, 10k and 100k tensors."""
    for n in (1000, 10000, 100000):
        model = os.path.join(d, "tensors%d.gguf" % n)
        fix = os.path.join(d, "tensors%d.json" % n)
        tensors_model(model, n)
        t0 = time.monotonic()
        with gm.Mount(model, ["-o", "edits=" + fix]) as m:
            mounted = time.monotonic() - t0
            times, held, cpu = held_and_edit(m, m.p("metadata", "k.000000"))
        print("%6d tensors: a state held by an open file %.0f KiB; one edit median %.1f ms "
              "(worst %.1f ms of 10), the daemon's CPU %.1f ms an edit; mount %.2f s"
              % (n, held, 1000 * statistics.median(times), 1000 * max(times), cpu, mounted))
        os.unlink(model)
        os.unlink(fix)


def keys_cost(d):
    """Section 3: per edit, per held state, and at mount, at 1k, 10k and 100k keys."""
    for n in (1000, 10000, 100000):
        model = os.path.join(d, "keys%d.gguf" % n)
        fix = os.path.join(d, "keys%d.json" % n)
        keys_model(model, n)
        with gm.Mount(model, ["-o", "edits=" + fix]) as m:
            times, held, cpu = held_and_edit(m, m.p("metadata", "k.000000"))
            # every 10th key edited: FILE holds n / 10 edits for the next mount
            doc = {"ggufs_edits": 1, "set": {}}
            with open(fix) as f:
                doc = json.load(f)
            doc["set"] = {"k.%06d" % i: {"type": "uint32", "value": i + 1} for i in range(0, n, 10)}
        with open(fix, "w") as f:
            json.dump(doc, f)
        t0 = time.monotonic()
        with gm.Mount(model, ["-o", "edits=" + fix]) as m:
            mounted = time.monotonic() - t0
            assert gm.read_file(m.p("metadata", "k.000010")) == b"11\n"
        print("%6d keys: one edit median %.1f ms (worst %.1f ms of 10), the daemon's CPU %.1f ms "
              "an edit; a state held by an open file %.0f KiB; mount with %d edits in FILE %.2f s"
              % (n, 1000 * statistics.median(times), 1000 * max(times), cpu, held, n // 10,
                 mounted))
        os.unlink(model)
        os.unlink(fix)


def main():
    gm.setup()
    d = tempfile.mkdtemp(prefix="ggufs-bench-edits-")
    only = os.environ.get("BENCH_EDITS_ONLY")
    if only:
        {"keys": keys_cost, "tensors": tensors_cost}[only](d)
        os.rmdir(d)
        return
    model = os.path.join(d, "big.gguf")
    make_model(model)
    subprocess.run(["cat", model], stdout=subprocess.DEVNULL, check=True)  # warm the holes
    fix = os.path.join(d, "fix.json")
    template = (b"{% for message in messages %}{{ message.content }}{% endfor %}\n" * 1100)[:65535]
    plain, edited = [], []
    for _ in range(3):
        with gm.Mount(model) as m:
            plain.append(cp_time(m.p("model.gguf")))
        with gm.Mount(model, ["-o", "edits=" + fix]) as m:
            edit(m.p("metadata", "tokenizer.chat_template"), template + b"\n")
            edited.append(cp_time(m.p("model.gguf")))
    gb = (os.path.getsize(model)) / 1e9
    print("model: %.2f GB (sparse), header with a 32000-token vocabulary" % gb)
    print("cp model.gguf /dev/null, no edits:   best %.2f s (%.2f GB/s), runs %s"
          % (min(plain), gb / min(plain), ", ".join("%.2f" % t for t in plain)))
    print("cp model.gguf /dev/null, edited:     best %.2f s (%.2f GB/s), runs %s"
          % (min(edited), gb / min(edited), ", ".join("%.2f" % t for t in edited)))
    print("edited / unedited: %.2fx" % (min(edited) / min(plain)))
    with gm.Mount(model, ["-o", "edits=" + fix]) as m:
        k = m.p("metadata", "tokenizer.chat_template")
        times = []
        for i in range(20):
            body = template[:-8] + b"%08d" % i
            times.append(edit(k, body + b"\n"))
            assert gm.read_file(k) == body + b"\n"
    print("64 KiB chat template edit (open, write, close; FILE fsync'd): median %.1f ms, "
          "worst %.1f ms of %d" % (1000 * statistics.median(times), 1000 * max(times), len(times)))
    if os.environ.get("BENCH_EDITS_KEYS", "1") != "0":
        keys_cost(d)
        tensors_cost(d)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.rmdir(d)


if __name__ == "__main__":
    main()
