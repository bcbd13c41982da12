#!/usr/bin/env python3
"""quants/NAME.gguf computed once (issue 36): a quant file's blocks go to the disk cache
(-o cache_dir, the default one, none with -o cache_dir=none) under the model's identity,
NAME and the rules' version, so that a second mount reads them from disk instead of
quantizing again, byte for byte llama.cpp's file (llama_model_quantize() of the pinned
libllama through ctypes) both times; the counters on the file (user.ggufs.blocks_*) say
where the blocks came from. Every mount on one cache_dir shares its entries at once: two
mounts of one model, the second reads every block the first made from disk, computing
none; a cache_dir that cannot be used is said on stderr as the mount starts; unmounted (lazily) while a file is held open, so that the old daemon still serves
it, and mounted again at once, the new mount computes none either. Unmounted and
mounted again at once, while the old daemon still exits holding the entry (slow_close.c
preloaded in it), the new mount shares it at once and reads every block from disk: a
single model's, an edited state's and a library's; the same when the old daemon's loop
is slow to return after the unmount (its last requests take long). Many NAMEs
read at once keep every block on disk (a file closed to make room and opened again
keeps its entry), and the daemon's threads stay within the mount's pool (the online
cores) and its FUSE threads, the pool's ending once idle, for one model and for a
library's models alike. A local model that shrinks while its quant is read gives EIO,
never a byte quantized from what is no longer there, the blocks made before included.
The daemon's anonymous memory stays bounded while a quant of a model larger than the
bound is read whole, and while many NAMEs are read at once.

Usage: test_quant_cache.py GGUFS_BINARY SLOW_CLOSE_SO (tests/quant/slow_close.c built).
Skipped (77) without /dev/fuse or without the
installed node-llama-cpp package (unless GGUFS_REQUIRE_LLAMA is set)."""
import contextlib
import errno
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mount"))
import ggufs_mount as gm  # noqa: E402
import test_quant_plan as qp  # noqa: E402

BLOCK = 128 << 10   # COMPUTED_BLOCK_SIZE
MEMORY_BOUND = 256 << 20
SLOW_CLOSE = None    # the preloaded library of slow_close.c (the second argument)
SLOW_CLOSE_MS = 3000   # how long the old daemon holds its entry past the unmount
POOL_IDLE_S = 2.0      # COMPUTED_POOL_IDLE_S: a worker without blocks to make ends
POOL_BLOCKS = (32, 10)   # COMPUTED_POOL_BLOCKS_MIN, _PER_THREAD: the pool's memory
THREAD_MEMORY = 5 << 20  # what a thread of the daemon may hold besides: a FUSE thread's
                         # buffers (libfuse's 1 MiB for requests, the 2 MiB huge page
                         # of replies; all of it resident under meson's MALLOC_PERTURB_)
                         # and quantization scratch
FUSE_THREADS = ["-o", "max_threads=8", "-o", "max_idle_threads=1"]   # libfuse's own
ENTRY_OVERHEAD = 24 << 10   # a disk cache entry's own: its directory, its map's header
# NAMEs quick to make, for the tests that read many at once
MANY = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q4_K_S", "Q5_K_S",
        "Q6_K")


def counters(path):
    """The file's user.ggufs.blocks_* counters: (computed, from_disk, stored)."""
    return tuple(int(os.getxattr(path, "user.ggufs.blocks_" + k))
                 for k in ("computed", "from_disk", "stored"))


def entries(cache_dir):
    """The disk cache's entry directories (named by a hash of their key): one per
    converted (tensor, type)."""
    if not os.path.isdir(cache_dir):
        return []
    return sorted(e for e in os.listdir(cache_dir)
                  if os.path.isdir(os.path.join(cache_dir, e)))


def du(path):
    """Bytes the files under path take on disk (st_blocks), as du counts them."""
    total = 0
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            total += os.lstat(os.path.join(root, n)).st_blocks * 512
    return total


def assert_all_had(test, c, blocks):
    """Counters c (computed, from_disk, stored) of a quant file read whole, its blocks
    made here: some block computed and stored, and each of its blocks had, computed or
    assembled from the pieces another block made (blocks and pieces do not align)."""
    computed, from_disk, stored = c
    test.assertGreater(computed, 0)
    test.assertGreater(stored, 0)
    test.assertGreaterEqual(computed + from_disk, blocks)


def tasks(pid):
    """The threads of process pid now."""
    return len(os.listdir("/proc/%d/task" % pid))


def named_threads(pid, name):
    """How many threads of process pid are named name now."""
    n = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
                n += f.read().rstrip("\n") == name
        except OSError:
            pass
    return n


def thread_states(pid):
    """What each thread of process pid waits in (its wchan), for a message."""
    states = []
    for t in sorted(os.listdir("/proc/%d/task" % pid)):
        try:
            with open("/proc/%d/task/%s/wchan" % (pid, t)) as f:
                states.append(f.read())
        except OSError:
            pass
    return " ".join(states)


def read_at_once(paths):
    """Each of paths read whole by a thread of its own, all at once: their sha256."""
    sums = [None] * len(paths)

    def read(i):
        sums[i] = qp.sha256_file(paths[i])
    readers = [threading.Thread(target=read, args=(i,)) for i in range(len(paths))]
    for r in readers:
        r.start()
    for r in readers:
        r.join()
    return sums


class Peak:
    """`with Peak(pid) as p:` the most threads and RssAnon of process pid seen while in
    it (p.threads, p.rss), sampled every 10 ms."""

    def __init__(self, pid):
        self.pid, self.threads, self.rss = pid, 0, 0
        self.done = threading.Event()
        self.sampler = threading.Thread(target=self.sample)

    def sample(self):
        while not self.done.is_set():
            try:
                self.threads = max(self.threads, tasks(self.pid))
            except OSError:
                pass
            self.rss = max(self.rss, rss_anon(self.pid))
            time.sleep(0.01)

    def __enter__(self):
        self.sampler.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.sampler.join()
        return False


@contextlib.contextmanager
def without_asan_quarantine():
    """Daemons started inside run without ASan's quarantine: the freed memory it keeps
    back to catch a use after free is anonymous memory that is not the daemon's, and
    a memory bound is the daemon's (a normal build's daemon has none)."""
    saved = os.environ.get("ASAN_OPTIONS")
    os.environ["ASAN_OPTIONS"] = ((saved or "") + ":quarantine_size_mb=0"
                                  ":thread_local_quarantine_size_kb=0").lstrip(":")
    try:
        yield
    finally:
        if saved is None:
            del os.environ["ASAN_OPTIONS"]
        else:
            os.environ["ASAN_OPTIONS"] = saved


def rss_anon(pid):
    """RssAnon of process pid, in bytes (0 once it is gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class QuantCache(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.llama = qp.Llama(qp.find_libllama())
        cls.dir = tempfile.mkdtemp(prefix="ggufs-quant-cache-")
        cls.model = os.path.join(cls.dir, "rand.gguf")
        qp.random_llama(cls.model, seed=21, n_embd=512, n_ff=1408, n_layer=2, n_head=8,
                        n_head_kv=4, n_vocab=2000, gtype=qp.F16)
        cls.refs = {}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def reference(self, src, name):
        """sha256 of llama.cpp's file of src for NAME."""
        key = (src, os.stat(src).st_mtime_ns, name)
        if key not in self.refs:
            out = os.path.join(self.dir, "ref.gguf")
            self.assertEqual(self.llama.quantize(src, out, qp.FTYPE[name]), 0)
            self.refs[key] = (qp.sha256_file(out), os.path.getsize(out))
            os.unlink(out)
        return self.refs[key]

    def test_second_mount_from_disk(self):
        """Mount 1 quantizes Q4_K_M and stores every block; mount 2 reads every block
        from the disk cache, quantizing none; both are llama.cpp's bytes."""
        want, size = self.reference(self.model, "Q4_K_M")
        blocks = -(-size // BLOCK)
        cache = os.path.join(self.dir, "cache")
        opts = ["-o", "cache_dir=" + cache]
        with gm.Mount(self.model, opts) as m:
            f = m.p("quants", "Q4_K_M.gguf")
            self.assertEqual(counters(f), (0, 0, 0))
            self.assertEqual(qp.sha256_file(f), want)
            # every block made here (and stored); a block the memory cache let go
            # before its reader came is read back from the disk cache
            assert_all_had(self, counters(f), blocks)
        first = len(entries(cache))
        self.assertGreater(first, 0)
        with gm.Mount(self.model, opts) as m:
            f = m.p("quants", "Q4_K_M.gguf")
            self.assertEqual(qp.sha256_file(f), want)
            computed, from_disk, stored = counters(f)
            self.assertEqual((computed, stored), (0, 0))
            self.assertGreaterEqual(from_disk, blocks)
        # another NAME of other types has other pieces, every block of it made; the
        # first's are still there
        with gm.Mount(self.model, opts) as m:
            f = m.p("quants", "Q8_0.gguf")
            want8, size8 = self.reference(self.model, "Q8_0")
            self.assertEqual(qp.sha256_file(f), want8)
            assert_all_had(self, counters(f), -(-size8 // BLOCK))
        self.assertGreater(len(entries(cache)), first)

    def quick_remount(self, source, rel, name, cache, edits=None, slow_serve=False):
        """source (a model or a library) mounted with cache, its quant file rel/NAME
        read whole (made and stored), unmounted and at once mounted again while the old
        daemon holds its entry SLOW_CLOSE_MS longer: the new mount shares it and reads
        every block from the disk cache (computes and stores none), llama.cpp's bytes,
        and says nothing of the disk cache. With edits (a path), the old mount has -o edits=edits
        and edits general.name, the new one a copy of that file (the old daemon holds
        the file itself while it exits), and llama.cpp's bytes are those of the edited
        model.gguf. With slow_serve, the old daemon closes its entry at once but its
        loop returns SLOW_CLOSE_MS after the unmount instead (its last requests take
        long)."""
        opts = ["-o", "cache_dir=" + cache]
        env = dict(os.environ)
        os.environ.update(LD_PRELOAD=SLOW_CLOSE,
                          ASAN_OPTIONS=env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
        if slow_serve:
            os.environ.update(GGUFS_SLOW_SERVE_MS=str(SLOW_CLOSE_MS))
        else:
            os.environ.update(GGUFS_SLOW_CLOSE_DIR=cache, GGUFS_SLOW_CLOSE_MS=str(SLOW_CLOSE_MS))
        try:
            old = gm.Mount(source, opts + (["-o", "edits=" + edits] if edits else [])).__enter__()
        finally:
            os.environ.clear()
            os.environ.update(env)
        try:
            if edits:
                gm.put(old.p("metadata", "general.name"), b"a name edited before the remount\n")
                want, size = self.reference(old.p("model.gguf"), name)
                shutil.copyfile(edits, edits + ".copy")
                opts += ["-o", "edits=" + edits + ".copy"]
            else:
                want, size = self.reference(self.model, name)
            blocks = -(-size // BLOCK)
            f = old.p(*rel, name + ".gguf")
            self.assertEqual(qp.sha256_file(f), want)
            assert_all_had(self, counters(f), blocks)   # made and stored
            subprocess.run(["fusermount3", "-u", old.path], check=True)
            with gm.Mount(source, opts) as new:
                # the old daemon is still exiting: its entry is not let go yet
                self.assertIsNone(old.proc.poll(), "the old daemon exited before the read")
                f = new.p(*rel, name + ".gguf")
                self.assertEqual(qp.sha256_file(f), want)
                computed, from_disk, stored = counters(f)
                self.assertEqual((computed, stored), (0, 0), "blocks computed again")
                self.assertGreaterEqual(from_disk, blocks)
                self.assertNotIn("disk cache", new.stderr())
        finally:
            old.__exit__(None, None, None)

    def test_two_mounts_at_once(self):
        """Two mounts of one model on one cache_dir at once: Q4_K_M read whole through
        the first (its file held open there), then through the second, which reads every
        block from the disk cache, computing none; both llama.cpp's bytes."""
        want, size = self.reference(self.model, "Q4_K_M")
        blocks = -(-size // BLOCK)
        opts = ["-o", "cache_dir=" + os.path.join(self.dir, "cache-two")]
        with gm.Mount(self.model, opts) as a, gm.Mount(self.model, opts) as b:
            fa, fb = a.p("quants", "Q4_K_M.gguf"), b.p("quants", "Q4_K_M.gguf")
            with open(fa, "rb"):
                self.assertEqual(qp.sha256_file(fa), want)
                self.assertEqual(qp.sha256_file(fb), want)
                computed, from_disk, stored = counters(fb)
                print("two mounts at once: the second computed %d of %d blocks, %d from "
                      "disk" % (computed, blocks, from_disk))
                self.assertEqual((computed, stored), (0, 0), "blocks computed again")
                self.assertGreaterEqual(from_disk, blocks)
            self.assertNotIn("disk cache", a.stderr() + b.stderr())

    def test_unusable_cache_said_at_start(self):
        """A cache_dir that cannot be used (writable by others): the mount says so on
        stderr as it starts (once mounted, before the daemon would detach), before any
        quant file is opened, in one line naming the directory and why; its quants are
        still llama.cpp's bytes, computed."""
        cache = os.path.join(self.dir, "cache-open")
        os.makedirs(cache, exist_ok=True)
        os.chmod(cache, 0o777)
        with gm.Mount(self.model, ["-o", "cache_dir=" + cache]) as m:
            # said once mounted, before the daemon would detach (a hang guard: 10 s)
            deadline = time.monotonic() + 10
            while not m.stderr() and time.monotonic() < deadline:
                time.sleep(0.02)
            self.assertEqual(m.stderr(), "ggufs: warning: the disk cache is not used: "
                             "cache_dir %s: writable by group or others (mode 0777); "
                             "chmod go-w it\n" % cache)
            f = m.p("quants", "Q8_0.gguf")
            self.assertEqual(qp.sha256_file(f), self.reference(self.model, "Q8_0")[0])
            self.assertEqual(counters(f)[2], 0)

    def test_remount_while_old_daemon_serves(self):
        """Q4_K_M read whole, its file held open, the mount unmounted lazily (fusermount3
        -u -z: the open file keeps the old daemon serving it, its session not ended) and
        mounted again at once: the new mount reads every block from the disk cache,
        computing none, while the old daemon still serves the open file."""
        want, size = self.reference(self.model, "Q4_K_M")
        blocks = -(-size // BLOCK)
        opts = ["-o", "cache_dir=" + os.path.join(self.dir, "cache-lazy")]
        old = gm.Mount(self.model, opts).__enter__()
        try:
            f = old.p("quants", "Q4_K_M.gguf")
            with open(f, "rb") as held:
                self.assertEqual(qp.sha256_file(f), want)
                subprocess.run(["fusermount3", "-u", "-z", old.path], check=True)
                with gm.Mount(self.model, opts) as new:
                    g = new.p("quants", "Q4_K_M.gguf")
                    self.assertEqual(qp.sha256_file(g), want)
                    self.assertIsNone(old.proc.poll(), "the old daemon exited before the read")
                    computed, from_disk, stored = counters(g)
                    print("remount while the old daemon serves: computed %d of %d blocks, "
                          "%d from disk" % (computed, blocks, from_disk))
                    self.assertEqual((computed, stored), (0, 0), "blocks computed again")
                    self.assertGreaterEqual(from_disk, blocks)
                    self.assertEqual(len(held.read(4096)), 4096)   # the old one serves
                    self.assertNotIn("disk cache", new.stderr())
        finally:
            old.__exit__(None, None, None)

    def test_quick_remount(self):
        """A single mount's quant file, unmounted and mounted again at once."""
        self.quick_remount(self.model, ("quants",), "Q4_K_M",
                           os.path.join(self.dir, "cache-remount"))

    def test_quick_remount_session_end(self):
        """The old daemon's loop returns SLOW_CLOSE_MS after the unmount: its entries are
        handed over when the kernel ends the session, not when the loop returns."""
        self.quick_remount(self.model, ("quants",), "Q5_K_M",
                           os.path.join(self.dir, "cache-remount-serve"), slow_serve=True)

    def test_quick_remount_edits(self):
        """A mount with edits: the quant file of its edited state's tree."""
        self.quick_remount(self.model, ("quants",), "Q8_0",
                           os.path.join(self.dir, "cache-remount-edits"),
                           edits=os.path.join(self.dir, "remount-edits.json"))

    def test_quick_remount_library(self):
        """A library's model's quant file, the library unmounted and mounted again at
        once."""
        root = os.path.join(self.dir, "library")
        os.makedirs(os.path.join(root, "models"), exist_ok=True)
        link = os.path.join(root, "models", "rand.gguf")
        if not os.path.exists(link):
            os.link(self.model, link)
        self.quick_remount(root, ("models", "rand", "quants"), "Q6_K",
                           os.path.join(self.dir, "cache-remount-library"))

    def test_many_names_at_once(self):
        """More NAMEs read at once than a model keeps open (four), two readers each:
        files are closed to make room and opened again while they are read, each
        keeping its disk cache entry. Every byte is llama.cpp's; nothing says another
        mount holds an entry; a second mount reads every NAME with no block computed."""
        cache = os.path.join(self.dir, "cache-many")
        opts = ["-o", "cache_dir=" + cache]
        want = [self.reference(self.model, n)[0] for n in MANY]
        with gm.Mount(self.model, opts) as m:
            paths = [m.p("quants", n + ".gguf") for n in MANY]
            self.assertEqual(read_at_once(paths + paths), want + want)
            self.assertNotIn("disk cache", m.stderr())
        with gm.Mount(self.model, opts) as m:
            paths = [m.p("quants", n + ".gguf") for n in MANY]
            self.assertEqual(read_at_once(paths), want)
            again = {n: counters(p)[0] for n, p in zip(MANY, paths)}
            self.assertEqual(again, dict.fromkeys(MANY, 0), "blocks computed again")

    def test_threads_and_memory_bound(self):
        """One model's NAMEs read at once, two readers each; then a library of three
        models (one file, three names), four NAMEs of each at once. The daemon's threads
        never pass those it had before, plus libfuse's (-o max_threads=8) and the
        mount's pool's (the online cores), and POOL_IDLE_S after the last read (10 s at
        most) the pool's have ended (libfuse keeps one idle: -o max_idle_threads=1); its
        RssAnon never passes what it was, plus the pool's memory and THREAD_MEMORY a
        thread (without ASan's quarantine: without_asan_quarantine)."""
        with without_asan_quarantine():
            self.threads_and_memory_bound()

    def threads_and_memory_bound(self):
        cores = os.cpu_count()
        pool = max(POOL_BLOCKS[0], POOL_BLOCKS[1] * cores) * BLOCK
        root = os.path.join(self.dir, "library-threads")
        os.makedirs(root, exist_ok=True)
        for i in range(3):
            if not os.path.exists(os.path.join(root, "m%d.gguf" % i)):
                os.link(self.model, os.path.join(root, "m%d.gguf" % i))
        cases = ((self.model, [("quants", n) for n in MANY] * 2),
                 (root, [("m%d" % i, "quants", n) for i in range(3) for n in MANY[:4]]))
        for source, files in cases:
            with gm.Mount(source, FUSE_THREADS + ["-o", "cache_dir=none"]) as m:
                pid = m.proc.pid
                paths = [m.p(*f[:-1], f[-1] + ".gguf") for f in files]
                for p in paths:   # looked up (a library's models built) before
                    os.stat(p)
                threads, rss = tasks(pid), rss_anon(pid)
                with Peak(pid) as peak:
                    read_at_once(paths)
                self.assertLessEqual(peak.threads, threads + 8 + cores,
                                     "%s: %d threads before, %d at the peak"
                                     % (source, threads, peak.threads))
                self.assertLessEqual(peak.rss, rss + pool + (8 + cores) * THREAD_MEMORY,
                                     "%s: RssAnon %d before, %d at the peak"
                                     % (source, rss, peak.rss))
                deadline = time.monotonic() + 10
                while tasks(pid) > threads + 2 and time.monotonic() < deadline:
                    time.sleep(0.1)
                self.assertLessEqual(tasks(pid), threads + 2,
                                     "%s: %d threads before, %d idle 10 s after: %s"
                                     % (source, threads, tasks(pid), thread_states(pid)))

    def test_changed_model_new_key(self):
        """A model rewritten in place (same path, other bytes) is quantized again, not
        read from the entry of the bytes it had."""
        cache = os.path.join(self.dir, "cache-changed")
        opts = ["-o", "cache_dir=" + cache]
        model = os.path.join(self.dir, "changing.gguf")
        qp.random_llama(model, seed=31, n_embd=256, n_ff=512, n_layer=1, n_head=4,
                        n_head_kv=4, n_vocab=300, gtype=qp.F16)
        with gm.Mount(model, opts) as m:
            self.assertEqual(qp.sha256_file(m.p("quants", "Q6_K.gguf")),
                             self.reference(model, "Q6_K")[0])
        qp.random_llama(model, seed=32, n_embd=256, n_ff=512, n_layer=1, n_head=4,
                        n_head_kv=4, n_vocab=300, gtype=qp.F16)
        with gm.Mount(model, opts) as m:
            f = m.p("quants", "Q6_K.gguf")
            want, size = self.reference(model, "Q6_K")
            self.assertEqual(qp.sha256_file(f), want)
            assert_all_had(self, counters(f), -(-size // BLOCK))

    def test_no_disk_cache(self):
        """-o cache_dir=none: nothing written anywhere, every block computed; without
        the option the default cache ($XDG_CACHE_HOME/ggufs) gets the entry."""
        default = os.path.join(os.environ["XDG_CACHE_HOME"], "ggufs")
        shutil.rmtree(default, ignore_errors=True)
        want, size = self.reference(self.model, "Q2_K")
        for _ in range(2):
            with gm.Mount(self.model, ["-o", "cache_dir=none"]) as m:
                f = m.p("quants", "Q2_K.gguf")
                self.assertEqual(qp.sha256_file(f), want)
                computed, from_disk, stored = counters(f)
                self.assertGreaterEqual(computed, -(-size // BLOCK))
                self.assertEqual((from_disk, stored), (0, 0))
        self.assertEqual(entries(default), [])
        with gm.Mount(self.model, default_cache=True) as m:
            self.assertEqual(qp.sha256_file(m.p("quants", "Q2_K.gguf")), want)
        self.assertGreater(len(entries(default)), 0)

    def test_shrinking_model(self):
        """The model file shrinks while its quant is read: every read after gives EIO
        (the blocks made ahead before included), every byte before is llama.cpp's."""
        model = os.path.join(self.dir, "shrinking.gguf")
        shutil.copyfile(self.model, model)
        out = os.path.join(self.dir, "ref-shrink.gguf")
        self.assertEqual(self.llama.quantize(model, out, qp.FTYPE["Q4_K_M"]), 0)
        with open(out, "rb") as f:
            want = f.read()
        os.unlink(out)
        with gm.Mount(model, ["-o", "cache_dir=none"]) as m:
            path = m.p("quants", "Q4_K_M.gguf")
            # O_DIRECT: every read reaches the daemon (none is the page cache's)
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            try:
                first = os.pread(fd, 1 << 20, 0)
                self.assertEqual(first, want[:1 << 20])
                time.sleep(0.2)   # the workers make blocks ahead meanwhile
                os.truncate(model, os.path.getsize(model) // 2)
                pos = len(first)
                with self.assertRaises(OSError) as e:
                    while pos < len(want):
                        got = os.pread(fd, 1 << 20, pos)
                        self.assertTrue(got)
                        self.assertEqual(got, want[pos:pos + len(got)], pos)
                        pos += len(got)
                self.assertEqual(e.exception.errno, errno.EIO)
                self.assertEqual(pos, len(first))
            finally:
                os.close(fd)

    def twins(self, stem, seed, gtype=qp.F16, other=qp.BF16):
        """A model of gtype and a file of the same weights as other, the same size and
        layout (written over it in place, it keeps its inode): their paths."""
        paths = []
        for t in (gtype, other):
            paths.append(os.path.join(self.dir, "%s-%d.gguf" % (stem, t)))
            qp.random_llama(paths[-1], seed=seed, n_embd=512, n_ff=1408, n_layer=2,
                            n_head=8, n_head_kv=4, n_vocab=2000, gtype=t)
        self.assertEqual(os.path.getsize(paths[0]), os.path.getsize(paths[1]))
        return paths

    def reference_bytes(self, src, name):
        """llama.cpp's file of src for NAME, whole."""
        out = os.path.join(self.dir, "ref-bytes.gguf")
        self.assertEqual(self.llama.quantize(src, out, qp.FTYPE[name]), 0)
        with open(out, "rb") as f:
            data = f.read()
        os.unlink(out)
        return data

    def assert_eio(self, path, count=4096):
        """A new open of path reads EIO from its first byte."""
        with self.assertRaises(OSError) as e:
            with open(path, "rb") as f:
                f.read(count)
        self.assertEqual(e.exception.errno, errno.EIO)

    def test_rewritten_in_place(self):
        """The review's case: an F16 model mounted, its quants/ listed (the plans made),
        then cp puts a BF16 file of the same weights over it (the same size and inode):
        Q8_0 read through that mount is EIO from its first byte (its plan is the F16
        file's), nothing goes to disk, and the log says the model changed; a fresh
        mount of the new file gives llama.cpp's bytes, every block computed (none from
        an entry made before)."""
        f16, bf16 = self.twins("inplace", 51)
        model = os.path.join(self.dir, "inplace.gguf")
        shutil.copyfile(f16, model)
        ino = os.stat(model).st_ino
        want, size = self.reference(bf16, "Q8_0")
        self.assertNotEqual(want, self.reference(f16, "Q8_0")[0])
        cache = os.path.join(self.dir, "cache-inplace")
        opts = ["-o", "cache_dir=" + cache]
        with gm.Mount(model, opts) as m:
            f = m.p("quants", "Q8_0.gguf")
            self.assertEqual(os.path.getsize(f), size)
            subprocess.run(["cp", bf16, model], check=True)
            self.assertEqual(os.stat(model).st_ino, ino)
            self.assert_eio(f)
            with self.assertRaises(OSError) as e:
                qp.sha256_file(f)
            self.assertEqual(e.exception.errno, errno.EIO)
            self.assertEqual(counters(f)[2], 0)   # nothing stored
            self.assertIn("changed while mounted", m.stderr())
        with gm.Mount(model, opts) as m:
            f = m.p("quants", "Q8_0.gguf")
            self.assertEqual(qp.sha256_file(f), want)
            assert_all_had(self, counters(f), -(-size // BLOCK))

    def test_rewritten_in_place_library(self):
        """In a library: a quant file opened before cp puts a BF16 file of the same
        weights over its F16 model, read after, is EIO; the model's directory looked up
        again is the new version, llama.cpp's bytes of it (every block computed), and a
        new mount of the library reads them from disk, the same."""
        f16, bf16 = self.twins("inplace-lib", 52)
        root = os.path.join(self.dir, "library-inplace")
        os.makedirs(root)
        model = os.path.join(root, "m.gguf")
        shutil.copyfile(f16, model)
        want, size = self.reference(bf16, "Q8_0")
        cache = os.path.join(self.dir, "cache-inplace-lib")
        opts = ["-o", "cache_dir=" + cache]
        with gm.Mount(root, opts) as m:
            f = m.p("m", "quants", "Q8_0.gguf")
            with open(f, "rb") as old:
                subprocess.run(["cp", bf16, model], check=True)
                with self.assertRaises(OSError) as e:
                    old.read()
                self.assertEqual(e.exception.errno, errno.EIO)
            self.assertEqual(qp.sha256_file(f), want)
            assert_all_had(self, counters(f), -(-size // BLOCK))
        with gm.Mount(root, opts) as m:
            f = m.p("m", "quants", "Q8_0.gguf")
            self.assertEqual(qp.sha256_file(f), want)
            self.assertEqual(counters(f)[0], 0)

    def test_rewritten_under_reader(self):
        """dd conv=notrunc writes a BF16 file of the same weights over the F16 model
        while its Q8_0 is read (O_DIRECT: every read the daemon's), the workers having
        made blocks ahead: every byte read before is llama.cpp's of the F16 file, every
        read after is EIO, never bytes of neither; a new open too (no page kept); a
        fresh mount gives llama.cpp's bytes of the new file, every block computed."""
        f16, bf16 = self.twins("underreader", 53)
        model = os.path.join(self.dir, "underreader.gguf")
        shutil.copyfile(f16, model)
        old = self.reference_bytes(f16, "Q8_0")
        want, size = self.reference(bf16, "Q8_0")
        cache = os.path.join(self.dir, "cache-underreader")
        opts = ["-o", "cache_dir=" + cache]
        step = 256 << 10
        with gm.Mount(model, opts) as m:
            path = m.p("quants", "Q8_0.gguf")
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            try:
                pos = 0
                for _ in range(4):
                    got = os.pread(fd, step, pos)
                    self.assertEqual(got, old[pos:pos + step], pos)
                    pos += len(got)
                time.sleep(0.2)   # the workers make blocks ahead meanwhile
                subprocess.run(["dd", "if=" + bf16, "of=" + model, "bs=1M", "conv=notrunc",
                                "status=none"], check=True)
                reads = 0
                while pos < len(old) and reads < 1000:
                    reads += 1
                    with self.assertRaises(OSError) as e:
                        os.pread(fd, step, pos)
                    self.assertEqual(e.exception.errno, errno.EIO)
                    pos += step
            finally:
                os.close(fd)
            self.assert_eio(path)
            self.assertEqual(os.path.getsize(path), size)
        with gm.Mount(model, opts) as m:
            f = m.p("quants", "Q8_0.gguf")
            self.assertEqual(qp.sha256_file(f), want)
            assert_all_had(self, counters(f), -(-size // BLOCK))

    def test_renamed_over_keeps_serving(self):
        """Another file renamed over the model's path while its Q8_0 is read (the model
        file removed, its bytes kept) changes nothing: the read goes on, llama.cpp's
        bytes of the file mounted, its blocks stored."""
        f16, bf16 = self.twins("renamed", 55)
        model = os.path.join(self.dir, "renamed.gguf")
        shutil.copyfile(f16, model)
        old = self.reference_bytes(f16, "Q8_0")
        with gm.Mount(model, ["-o", "cache_dir=" + os.path.join(self.dir, "cache-renamed")]) as m:
            path = m.p("quants", "Q8_0.gguf")
            with open(path, "rb") as f:
                got = f.read(1 << 20)
                newer = model + ".new"
                shutil.copyfile(bf16, newer)
                os.rename(newer, model)
                got += f.read()
            self.assertEqual(got, old)
            self.assertGreater(counters(path)[2], 0)

    def test_changed_model_page_cache(self):
        """F32 of an F32 model read whole through the page cache, then the model shrinks
        or another file of its size is written over it: a new open reads EIO from the
        first byte, not the pages the kernel kept, and so does quants.tsv."""
        f32, other = self.twins("pagecache", 54, gtype=qp.F32, other=qp.F32)
        for change in ("shrink", "rewrite"):
            model = os.path.join(self.dir, "pagecache-%s.gguf" % change)
            shutil.copyfile(f32, model)
            with gm.Mount(model, ["-o", "cache_dir=none"]) as m:
                path = m.p("quants", "F32.gguf")
                self.assertEqual(qp.sha256_file(path), self.reference(f32, "F32")[0])
                with open(m.p("quants", "quants.tsv"), "rb") as f:
                    self.assertTrue(f.read())
                if change == "shrink":
                    os.truncate(model, os.path.getsize(model) // 2)
                else:
                    subprocess.run(["dd", "if=" + other, "of=" + model, "bs=1M",
                                    "conv=notrunc", "status=none"], check=True)
                self.assert_eio(path)
                self.assert_eio(m.p("quants", "quants.tsv"))

    def test_model_moved_keeps_pieces(self):
        """mv, ln, chmod 600, touch and cp of a model, then a fresh mount of it: Q4_K_M
        read whole computes no block (its pieces are keyed by the tensors' bytes, not
        the path, inode or times) and adds nothing to the cache but the hashes of its
        tensors under the new version (an entry each); llama.cpp's bytes."""
        want, size = self.reference(self.model, "Q4_K_M")
        cache = os.path.join(self.dir, "cache-moved")
        opts = ["-o", "cache_dir=" + cache]
        folder = os.path.join(self.dir, "moved")
        os.makedirs(folder)
        model = os.path.join(folder, "a.gguf")
        shutil.copyfile(self.model, model)
        with gm.Mount(model, opts) as m:
            self.assertEqual(qp.sha256_file(m.p("quants", "Q4_K_M.gguf")), want)
        before = du(cache)

        def mv(path):
            os.rename(path, path + ".mv")
            return path + ".mv"

        def ln(path):
            os.link(path, path + ".ln")
            return path + ".ln"

        def chmod(path):
            os.chmod(path, 0o600)
            return path

        def touch(path):
            os.utime(path)
            return path

        def cp(path):
            subprocess.run(["cp", path, path + ".cp"], check=True)
            return path + ".cp"
        for change in (mv, ln, chmod, touch, cp):
            model = change(model)
            with gm.Mount(model, opts) as m:
                f = m.p("quants", "Q4_K_M.gguf")
                self.assertEqual(qp.sha256_file(f), want)
                computed, from_disk, stored = counters(f)
                print("after %s: %d blocks computed, %d from disk" % (change.__name__,
                                                                     computed, from_disk))
                self.assertEqual((computed, stored), (0, 0), change.__name__)
                self.assertGreaterEqual(from_disk, -(-size // BLOCK))
                kept = int(os.getxattr(m.p("quants"), "user.ggufs.tensors_hash_kept"))
                hashed = int(os.getxattr(m.p("quants"), "user.ggufs.tensors_hashed"))
                self.assertEqual(kept, 0, change.__name__)   # another version each time
            added = du(cache) - before
            self.assertLessEqual(added, hashed * ENTRY_OVERHEAD, change.__name__)
            before += added

    def tensor_types(self, name):
        """llama.cpp's file of the model for NAME: {tensor: (type, bytes)} and its size."""
        data = self.reference_bytes(self.model, name)
        infos, end = qp.parse_infos(data, with_end=True)
        start = -(-end // 32) * 32
        offs = sorted(i[3] for i in infos) + [len(data) - start]
        sizes = {o: offs[k + 1] - o for k, o in enumerate(offs[:-1])}
        return {i[0]: (i[2], sizes[i[3]]) for i in infos}, len(data)

    def test_names_share_pieces(self):
        """Q4_K_S after Q4_K_M adds to the cache (du) only the bytes of the tensors
        whose type differs (and each entry's own few KiB), not a copy of the file."""
        cache = os.path.join(self.dir, "cache-share")
        opts = ["-o", "cache_dir=" + cache]
        m_types, _ = self.tensor_types("Q4_K_M")
        s_types, s_size = self.tensor_types("Q4_K_S")
        differ = [t for t in s_types if s_types[t][0] != m_types[t][0]]
        differ_bytes = sum(s_types[t][1] for t in differ)
        bound = differ_bytes + len(differ) * ENTRY_OVERHEAD + BLOCK
        self.assertLess(bound, s_size // 2)   # (a copy of the file would not pass it)
        with gm.Mount(self.model, opts) as m:
            self.assertEqual(qp.sha256_file(m.p("quants", "Q4_K_M.gguf")),
                             self.reference(self.model, "Q4_K_M")[0])
            before = du(cache)
            self.assertEqual(qp.sha256_file(m.p("quants", "Q4_K_S.gguf")),
                             self.reference(self.model, "Q4_K_S")[0])
            added = du(cache) - before
        print("Q4_K_S after Q4_K_M: %d bytes added, %d tensors of %d bytes differ, "
              "the file %d bytes" % (added, len(differ), differ_bytes, s_size))
        self.assertLessEqual(added, bound)

    def test_same_type_not_stored(self):
        """F16.gguf of an F16 model: every tensor's type stays, read from the model:
        nothing computed, nothing added to the cache but its directory's lock."""
        cache = os.path.join(self.dir, "cache-same")
        want, size = self.reference(self.model, "F16")
        with gm.Mount(self.model, ["-o", "cache_dir=" + cache]) as m:
            before = du(cache)
            f = m.p("quants", "F16.gguf")
            self.assertEqual(qp.sha256_file(f), want)
            computed, from_disk, stored = counters(f)
            self.assertEqual((computed, stored), (0, 0))
            self.assertGreaterEqual(from_disk, -(-size // BLOCK))
        print("F16 of F16 (%d bytes): %d bytes added to the cache" % (size,
                                                                     du(cache) - before))
        self.assertLessEqual(du(cache) - before, ENTRY_OVERHEAD)

    def test_same_tensors_other_name(self):
        """MXFP4_MOE of a dense model gives its tensors Q8_0's types: read after Q8_0,
        it computes no block and adds nothing to the cache."""
        cache = os.path.join(self.dir, "cache-mxfp4")
        opts = ["-o", "cache_dir=" + cache]
        with gm.Mount(self.model, opts) as m:
            self.assertEqual(qp.sha256_file(m.p("quants", "Q8_0.gguf")),
                             self.reference(self.model, "Q8_0")[0])
            before = du(cache)
            f = m.p("quants", "MXFP4_MOE.gguf")
            want, size = self.reference(self.model, "MXFP4_MOE")
            self.assertEqual(qp.sha256_file(f), want)
            computed, from_disk, stored = counters(f)
            self.assertEqual((computed, stored), (0, 0))
            self.assertGreaterEqual(from_disk, -(-size // BLOCK))
            self.assertEqual(du(cache), before)

    def test_rewritten_times_restored(self):
        """A model rewritten in place with other weights of the same size, its mtime put
        back (touch -r): a fresh mount never serves a block of what it held before,
        llama.cpp's bytes of the new content."""
        f16, bf16 = self.twins("restored", 56)
        model = os.path.join(self.dir, "restored.gguf")
        shutil.copyfile(f16, model)
        want, size = self.reference(bf16, "Q8_0")
        cache = os.path.join(self.dir, "cache-restored")
        opts = ["-o", "cache_dir=" + cache]
        with gm.Mount(model, opts) as m:
            self.assertEqual(qp.sha256_file(m.p("quants", "Q8_0.gguf")),
                             self.reference(f16, "Q8_0")[0])
        st = os.stat(model)
        with open(bf16, "rb") as src, open(model, "r+b") as dst:
            dst.write(src.read())
        os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
        after = os.stat(model)
        self.assertEqual((after.st_size, after.st_mtime_ns, after.st_ino),
                         (st.st_size, st.st_mtime_ns, st.st_ino))
        with gm.Mount(model, opts) as m:
            f = m.p("quants", "Q8_0.gguf")
            self.assertEqual(qp.sha256_file(f), want)
            assert_all_had(self, counters(f), -(-size // BLOCK))

    def test_one_entry_whatever_path(self):
        """Two more paths to one model in a library, a symbolic link and a hard link:
        the same quant read through each (each mounted alone) is one disk cache entry,
        the second read every block from it."""
        root = os.path.join(self.dir, "library-paths")
        os.makedirs(root)
        model = os.path.join(root, "a.gguf")
        shutil.copyfile(self.model, model)
        os.symlink("a.gguf", os.path.join(root, "b.gguf"))
        os.link(model, os.path.join(root, "c.gguf"))
        want, size = self.reference(self.model, "Q6_K")
        cache = os.path.join(self.dir, "cache-paths")
        opts = ["-o", "cache_dir=" + cache]
        made = []
        for name in ("b", "c"):
            with gm.Mount(root, opts) as m:
                f = m.p(name, "quants", "Q6_K.gguf")
                self.assertEqual(qp.sha256_file(f), want)
                if name == "c":
                    self.assertEqual(counters(f)[0], 0, "blocks computed again")
            made.append(entries(cache))
        self.assertTrue(made[0])
        self.assertEqual(made[1], made[0])

    def test_tensor_hashes_kept(self):
        """A remount of the same version of a model (its device, inode, size, mtime and
        ctime) reads the hashes of its tensors of 1 MiB or more as the first mount kept
        them (user.ggufs.tensors_hash_kept of quants/) and hashes only the smaller ones
        (tensors_hashed); after a touch (a new ctime: another version) every one is
        hashed again, and the blocks still come from disk. llama.cpp's bytes each time."""
        want, size = self.reference(self.model, "Q8_0")
        model = os.path.join(self.dir, "kept-hashes.gguf")
        shutil.copyfile(self.model, model)
        opts = ["-o", "cache_dir=" + os.path.join(self.dir, "cache-hashes")]
        seen = []
        for step in ("first", "again", "touched"):
            if step == "touched":
                os.utime(model)
            with gm.Mount(model, opts) as m:
                f = m.p("quants", "Q8_0.gguf")
                self.assertEqual(qp.sha256_file(f), want, step)
                seen.append(tuple(int(os.getxattr(m.p("quants"), "user.ggufs.tensors_" + k))
                                  for k in ("hashed", "hash_kept")) + counters(f)[:1])
        print("tensors (hashed, kept, blocks computed): first %s, again %s, touched %s"
              % tuple(seen))
        (h1, k1, c1), (h2, k2, c2), (h3, k3, c3) = seen
        self.assertEqual(k1, 0)
        self.assertGreater(c1, 0)
        self.assertGreater(k2, 0)
        self.assertEqual(h2 + k2, h1)
        self.assertEqual(c2, 0)
        self.assertEqual((h3, k3, c3), (h1, 0, 0))

    def test_quant_threads_and_total(self):
        """-o quant_threads=1: four NAMEs read at once, never more than one of the pool's
        workers (threads named ggufs-computed, COMPUTED_THREAD_NAME) alive, and one at
        least (the reads went ahead). Each file's user.ggufs.blocks_total is its 128 KiB
        blocks, and a whole read had every one of them (computed or from disk)."""
        with gm.Mount(self.model, FUSE_THREADS + ["-o", "cache_dir=none,quant_threads=1"]) as m:
            paths = [m.p("quants", n + ".gguf") for n in MANY[:4]]
            most = [0]
            done = threading.Event()

            def sample():
                while not done.is_set():
                    most[0] = max(most[0], named_threads(m.proc.pid, "ggufs-computed"))
                    time.sleep(0.005)
            sampler = threading.Thread(target=sample)
            sampler.start()
            try:
                read_at_once(paths)
            finally:
                done.set()
                sampler.join()
            self.assertEqual(most[0], 1, "pool workers at the peak")
            for p in paths:
                total = int(os.getxattr(p, "user.ggufs.blocks_total"))
                self.assertEqual(total, (os.path.getsize(p) + BLOCK - 1) // BLOCK, p)
                computed, from_disk, _ = counters(p)
                self.assertGreaterEqual(computed + from_disk, total, p)

    def test_memory_bound(self):
        """A model larger than the bound: its F32 (twice its size) and Q8_0 read whole
        at once, the daemon's anonymous memory stays under 256 MB (without ASan's
        quarantine: without_asan_quarantine)."""
        big = os.path.join(self.dir, "big.gguf")
        qp.random_llama(big, seed=41, n_embd=1536, n_ff=4096, n_layer=4, n_head=12,
                        n_head_kv=4, n_vocab=32000, gtype=qp.F16)
        self.assertGreater(os.path.getsize(big), 200 << 20)
        peak = [0]
        with without_asan_quarantine(), \
                gm.Mount(big, ["-o", "cache_dir=" + os.path.join(self.dir, "cache-big")]) as m:
            done = threading.Event()

            def sample():
                while not done.is_set():
                    peak[0] = max(peak[0], rss_anon(m.proc.pid))
                    time.sleep(0.02)
            sampler = threading.Thread(target=sample)
            sampler.start()
            sizes = {}
            try:
                readers = []
                for name in ("F32", "Q8_0"):
                    path = m.p("quants", name + ".gguf")
                    sizes[name] = os.path.getsize(path)
                    readers.append(threading.Thread(target=qp.sha256_file, args=(path,)))
                for r in readers:
                    r.start()
                for r in readers:
                    r.join()
            finally:
                done.set()
                sampler.join()
            self.assertGreater(sizes["F32"], 2 * MEMORY_BOUND)
            self.assertGreater(peak[0], 0)
            self.assertLess(peak[0], MEMORY_BOUND, "peak RssAnon %d" % peak[0])
        os.unlink(big)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: %s GGUFS_BINARY SLOW_CLOSE_SO [unittest args]" % sys.argv[0])
    SLOW_CLOSE = os.path.abspath(sys.argv.pop(2))
    qp.mount_test_main()
