#!/usr/bin/env python3
"""The disk cache (-o cache_dir) against the fault server:
- read every tensor, unmount, mount again with the same cache_dir: the second mount's
  only requests are the mount's header request (the header is not cached on disk: it
  gives the size and ETag that name the entry), no data request; the directory and its
  entries are mode 0700, its files 0600; the token (HF_TOKEN, a unique string the server
  requires) is in no file and no name there;
- the daemon killed (SIGKILL) while fetches into the cache are in flight, then a mount
  with the same cache_dir: every byte equals the local file's, and blocks stored before
  the kill are not fetched again;
- -o cache_max: the cache directory's disk usage (st_blocks) never goes above it, also
  while reads are storing blocks, and with two mounts of two models sharing it;
- the file swapped on the server (same size, new ETag): a new entry beside the old one,
  and the new mount serves the new bytes, never the stale ones;
- two mounts of the same version at once share its entry: what the first read, the
  second reads from disk without a data request or a warning; an entry another process
  holds shared (as every mount does) is read from at once, and one held exclusively (a
  ggufs older than shared entries) is said at once, naming the model as given; a quick
  remount reads from the disk cache;
- a split model: an entry per shard, and a second mount fetches only the shards' headers;
- a cache_dir that cannot be made or is not a directory: exit 1, one line naming it,
  nothing mounted; a cache_max that is not a size: exit 2.
Reads run in child processes with deadlines where a hang could happen."""
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from remote_common import (TinyCase, TINY, EnvMount, check_raw_files, FaultServer, env_without_token, gm, range_length,
                           read_bounded, split_gguf)

PATH = "/models/tinyllama-q4km.gguf"
HEADER_REQUEST_BYTES = 1 << 20   # the mount's first request: bytes=0-1048575
BLOCK = 128 << 10
WAIT = 30.0   # bound on waiting for something the daemon does


def cache_files(d):
    """[(path, lstat)] of everything under the cache directory d (not d itself)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(d):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            try:
                out.append((p, os.lstat(p)))
            except FileNotFoundError:   # removed meanwhile by an eviction
                pass
    return out


def disk_usage(d):
    """Bytes that everything under d takes on disk (st_blocks), as ggufs bounds it."""
    return sum(st.st_blocks * 512 for _, st in cache_files(d))


def disk_usage_at_rest(d):
    """disk_usage(d) holding the cache's lock, as a mount holds it to store or evict: a
    walk while another mount moves a block from one entry to another can count it twice
    (one block over, once in a CI run)."""
    with open(os.path.join(d, "lock"), "r+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            return disk_usage(d)
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def entries(d):
    """The entry directories of the cache d."""
    return sorted(n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)))


def stored_blocks(entry_dir):
    """How many blocks the map of an entry records (non-zero 32-byte records)."""
    try:
        with open(os.path.join(entry_dir, "map"), "rb") as f:
            f.seek(4096)
            recs = f.read()
    except OSError:
        return 0
    return sum(1 for i in range(0, len(recs) - 31, 32) if any(recs[i:i + 32]))


def clear_when_quiet(s):
    """Empties the fault server's log once no request is being answered, so that the
    last answer to a mount that has ended is not logged as the next mount's."""
    deadline = time.monotonic() + WAIT
    while True:
        s.clear_log()   # max_in_flight restarts from the requests running now
        if s.max_in_flight == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError("the server is still answering a mount that has ended")
        time.sleep(0.02)


def data_requests(log):
    """The requests of a log that are not the mount's header request."""
    return [r for r in log if r.range != "bytes=0-%d" % (HEADER_REQUEST_BYTES - 1)]


class Cache(TinyCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ggufs-cache-test-")
        self.cache = os.path.join(self.tmp, "cache")   # made by ggufs

    def tearDown(self):
        import shutil
        shutil.rmtree(self.tmp)

    def opts(self, *more):
        return ["-o", "cache_dir=" + self.cache] + list(more)

    def read_all(self, m, data=None):
        """Reads every tensor's raw file and checks its bytes against data (the local
        file's by default)."""
        check_raw_files(self, m, self.data if data is None else data, self.extents)

    def test_second_mount_fetches_no_data(self):
        token = "hf_cacheTestToken_%d_%s" % (os.getpid(), os.urandom(6).hex())
        with FaultServer({PATH: self.data}) as s:
            env = env_without_token(HF_TOKEN=token, HF_ENDPOINT=s.url)
            s.token = token
            with EnvMount(s.url + PATH, self.opts(), env) as m:
                self.read_all(m)
            first = s.log_settled(2)
            self.assertGreater(len(data_requests(first)), 0, "the first mount fetched data")
            clear_when_quiet(s)
            with EnvMount(s.url + PATH, self.opts(), env) as m:
                self.read_all(m)
            second = s.log_settled(1)
        self.assertEqual(len(second), 1, [r.range for r in second])
        self.assertEqual(data_requests(second), [], "the second mount fetched data")
        print("first mount: %d requests, second: %d (the header's)" % (len(first), len(second)))

        # modes
        st = os.stat(self.cache)
        self.assertEqual(st.st_mode & 0o7777, 0o700)
        files = cache_files(self.cache)
        self.assertEqual(len(entries(self.cache)), 1)
        for p, st in files:
            want = 0o700 if os.path.isdir(p) else 0o600
            self.assertEqual(st.st_mode & 0o7777, want, p)
        # the token: in no name and no byte of any file
        for p, st in files:
            self.assertNotIn(token, os.path.relpath(p, self.cache))
            if not os.path.isdir(p):
                with open(p, "rb") as f:
                    self.assertNotIn(token.encode(), f.read(), p)

    def test_kill_mid_fetch_then_every_byte_right(self):
        with FaultServer({PATH: self.data}) as s:
            m = EnvMount(s.url + PATH, self.opts()).__enter__()
            reader = None
            try:
                (entry,) = entries(self.cache)
                edir = os.path.join(self.cache, entry)
                s.rate = 256 * 1024   # a block takes half a second: fetches in flight
                names = sorted(self.extents, key=lambda n: self.extents[n][0])
                reader = subprocess.Popen(
                    [sys.executable, "-c", "import sys\nfor p in sys.argv[1:]: open(p, 'rb').read()"]
                    + [m.p("tensors", n) for n in names], stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                deadline = time.monotonic() + WAIT
                while stored_blocks(edir) < 2 and time.monotonic() < deadline:
                    time.sleep(0.02)   # until blocks are on disk
                before = stored_blocks(edir)
                self.assertGreaterEqual(before, 2, "blocks stored before the kill")
                in_flight = 0
                while not in_flight and time.monotonic() < deadline:
                    s.clear_log()   # max_in_flight restarts from the requests running now
                    in_flight = s.max_in_flight
                self.assertGreater(in_flight, 0, "a fetch is in flight at the kill")
                m.proc.send_signal(signal.SIGKILL)
                m.proc.wait(timeout=WAIT)
            finally:
                gm.unmount(m.path)
                if m.proc.poll() is None:
                    m.proc.kill()
                m.proc.wait()
                m.errfile.close()
                if reader:
                    try:
                        reader.wait(timeout=WAIT)
                    except subprocess.TimeoutExpired:
                        reader.kill()
                        reader.wait()
                if not gm.is_mounted(m.path):
                    os.rmdir(m.path)
                    os.rmdir(m.dir)
            s.rate = None
            clear_when_quiet(s)
            with EnvMount(s.url + PATH, self.opts()) as m:
                self.read_all(m)
            fetched = sum(range_length(r.range) for r in data_requests(s.log_settled(1)))
        past_header = len(self.data) - HEADER_REQUEST_BYTES
        print("%d blocks on disk and %d requests in flight at the kill; the next mount "
              "fetched %d bytes of the %d past the header"
              % (before, in_flight, fetched, past_header))
        self.assertLessEqual(fetched, past_header - 2 * BLOCK,
                             "blocks stored before the kill are not fetched again")

    def test_cache_max_holds(self):
        limit = 1 << 20
        peak = [0]
        stop = threading.Event()

        def watch():
            while not stop.is_set():
                if os.path.isdir(self.cache):
                    peak[0] = max(peak[0], disk_usage(self.cache))
                time.sleep(0.005)   # sampling, not an assertion
        with FaultServer({PATH: self.data}) as s:
            t = threading.Thread(target=watch)
            t.start()
            try:
                with EnvMount(s.url + PATH, self.opts("-o", "cache_max=1M")) as m:
                    for name, (a, _) in sorted(self.extents.items()):
                        got = gm.read_file(m.p("tensors", name))
                        self.assertTrue(got == self.data[a:a + len(got)], name)
                        usage = disk_usage(self.cache)
                        peak[0] = max(peak[0], usage)
                        self.assertLessEqual(usage, limit)
                    (entry,) = entries(self.cache)
                    kept = stored_blocks(os.path.join(self.cache, entry))
            finally:
                stop.set()
                t.join()
        self.assertLessEqual(peak[0], limit)
        self.assertGreater(kept, 0, "something was cached")
        print("cache_max=1M: peak usage %d bytes, %d blocks kept" % (peak[0], kept))

    def test_two_models_share_cache_max(self):
        start = min(a for a, _ in self.extents.values())
        other = self.data[:start] + bytes(b ^ 0x33 for b in self.data[start:])
        limit = 1 << 20
        peak = [0]
        stop = threading.Event()

        def watch():
            while not stop.is_set():
                peak[0] = max(peak[0], disk_usage_at_rest(self.cache))
                time.sleep(0.005)   # sampling, not an assertion
        errors = []

        def read_all(m, data):
            try:
                self.read_all(m, data)
            except AssertionError as e:
                errors.append(e)
        with FaultServer({PATH: self.data, "/models/other.gguf": other}) as s:
            opts = self.opts("-o", "cache_max=1M")
            with EnvMount(s.url + PATH, opts) as a, \
                    EnvMount(s.url + "/models/other.gguf", opts) as b:
                t = threading.Thread(target=watch)
                t.start()
                try:
                    readers = [threading.Thread(target=read_all, args=(a, self.data)),
                               threading.Thread(target=read_all, args=(b, other))]
                    self.assertEqual(gm.run_threads(readers, 300), [])
                finally:
                    stop.set()
                    t.join()
                kept = [stored_blocks(os.path.join(self.cache, e)) for e in entries(self.cache)]
        self.assertEqual(errors, [])
        self.assertLessEqual(peak[0], limit)
        self.assertEqual(len(kept), 2)
        print("two mounts, cache_max=1M: peak usage %d bytes, blocks kept %r" % (peak[0], kept))

    def test_swapped_file_new_entry_never_stale(self):
        start = min(a for a, _ in self.extents.values())
        new = self.data[:start] + bytes(b ^ 0x5A for b in self.data[start:])
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH, self.opts()) as m:
                self.read_all(m)
            (old_entry,) = entries(self.cache)
            s.swap(PATH, new)
            clear_when_quiet(s)
            with EnvMount(s.url + PATH, self.opts()) as m:
                self.read_all(m, new)
            self.assertGreater(len(data_requests(s.log_settled(2))), 0,
                               "the new version's data was fetched")
        both = entries(self.cache)
        self.assertEqual(len(both), 2, "a new entry beside the old one")
        self.assertIn(old_entry, both)

    def test_two_mounts_of_one_version(self):
        """Two mounts of one version at once share its entry: what the first read, the
        second reads from the disk cache, without a data request or a warning."""
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH, self.opts()) as a, \
                    EnvMount(s.url + PATH, self.opts()) as b:
                self.read_all(a)
                clear_when_quiet(s)
                self.read_all(b)
                self.assertEqual(data_requests(s.log_settled(1)), [])
                self.assertGreater(int(os.getxattr(b.path, "user.ggufs.disk_cache_hits")), 0)
                self.assertEqual(a.stderr(), "")
                self.assertEqual(b.stderr(), "")
        self.assertEqual(len(entries(self.cache)), 1)

    def test_shared_entry_read_at_once(self):
        """An entry another process holds shared (as every mount that uses it does): a
        new mount reads from it at once, without a warning or a data request."""
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH, self.opts()) as m:
                self.read_all(m)
            (entry,) = entries(self.cache)
            fd = os.open(os.path.join(self.cache, entry, "map"), os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                clear_when_quiet(s)
                with EnvMount(s.url + PATH, self.opts()) as m:
                    self.read_all(m)
                    self.assertEqual(m.stderr(), "")
                    self.assertGreater(int(os.getxattr(m.path, "user.ggufs.disk_cache_hits")), 0)
            finally:
                os.close(fd)
            self.assertEqual(data_requests(s.log_settled(1)), [])

    def test_exclusive_entry_not_waited_for(self):
        """An entry held exclusively (as a ggufs older than shared entries holds it): the
        new mount says at once, naming the model as given (hf://), that it reads without
        the disk cache."""
        with FaultServer({PATH: self.data, "/o/r/resolve/main/tinyllama-q4km.gguf":
                          self.data}) as s:
            env = env_without_token(HF_ENDPOINT=s.url)
            hf = "hf://o/r/tinyllama-q4km.gguf"
            with EnvMount(hf, self.opts(), env) as m:
                self.read_all(m)
            (entry,) = entries(self.cache)
            fd = os.open(os.path.join(self.cache, entry, "map"), os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                start = time.monotonic()
                with EnvMount(hf, self.opts(), env) as m:
                    self.assertLess(time.monotonic() - start, 5)
                    self.assertEqual(m.stderr(), "ggufs: warning: %s: the disk cache refused "
                                     "an entry for this file (no room under cache_max, a URL "
                                     "too long, a write error, or an older ggufs holding "
                                     "it): it is read without the disk cache\n" % hf)
            finally:
                os.close(fd)

    def test_quick_remount_keeps_the_cache(self):
        """Unmounted and mounted again at once, before the first daemon has exited, a
        few times: the new mount reads from the disk cache every time."""
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH, self.opts()) as m:
                self.read_all(m)
            for _ in range(3):
                a = EnvMount(s.url + PATH, self.opts()).__enter__()
                subprocess.run(["fusermount3", "-u", a.path], check=True)
                with EnvMount(s.url + PATH, self.opts()) as b:
                    self.read_all(b)
                    self.assertEqual(b.stderr(), "")
                    self.assertGreater(int(os.getxattr(b.path, "user.ggufs.disk_cache_hits")), 0)
                a.__exit__(None, None, None)

    def default_mount(self, s, env):
        return EnvMount(s.url + PATH, [], env, default_cache=True)

    def test_default_cache_under_xdg_cache_home(self):
        """Without -o cache_dir: $XDG_CACHE_HOME/ggufs (made, mode 0700, with missing
        parents), and a second mount fetches no data."""
        xdg = os.path.join(self.tmp, "xdg", "deeper")
        with FaultServer({PATH: self.data}) as s:
            env = env_without_token(XDG_CACHE_HOME=xdg)
            with self.default_mount(s, env) as m:
                self.read_all(m)
                self.assertIn("user.ggufs.disk_cache_hits", os.listxattr(m.path))
            clear_when_quiet(s)
            with self.default_mount(s, env) as m:
                self.read_all(m)
                self.assertEqual(m.stderr(), "")
            self.assertEqual(data_requests(s.log_settled(1)), [])
        for d in (os.path.join(self.tmp, "xdg"), xdg, os.path.join(xdg, "ggufs")):
            self.assertEqual(os.stat(d).st_mode & 0o7777, 0o700, d)
        self.assertEqual(len(entries(os.path.join(xdg, "ggufs"))), 1)

    def test_default_cache_under_home(self):
        """XDG_CACHE_HOME unset, or relative (the XDG spec ignores it then):
        ~/.cache/ggufs, ~/.cache made mode 0700."""
        home = os.path.join(self.tmp, "home")
        os.mkdir(home)
        for n, xdg in enumerate((None, "relative/cache"), 1):
            with FaultServer({PATH: self.data}) as s:
                env = env_without_token(HOME=home)
                env.pop("XDG_CACHE_HOME", None)
                if xdg:
                    env["XDG_CACHE_HOME"] = xdg
                with self.default_mount(s, env) as m:
                    self.read_all(m)
            self.assertEqual(os.stat(os.path.join(home, ".cache")).st_mode & 0o7777, 0o700)
            # (one entry per server: each has a port, so a URL, of its own)
            self.assertEqual(len(entries(os.path.join(home, ".cache", "ggufs"))), n)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "relative")))

    def test_cache_dir_none(self):
        """-o cache_dir=none: no disk cache, nothing made under the cache home."""
        xdg = os.path.join(self.tmp, "xdg")
        with FaultServer({PATH: self.data}) as s:
            env = env_without_token(XDG_CACHE_HOME=xdg)
            with EnvMount(s.url + PATH, ["-o", "cache_dir=none"], env, default_cache=True) as m:
                self.read_all(m)
                self.assertNotIn("user.ggufs.disk_cache_hits", os.listxattr(m.path))
        self.assertFalse(os.path.exists(os.path.join(xdg, "ggufs")))

    def test_default_cache_trusted_only(self):
        """The default directory is held to cache_dir's rules: another user's is refused
        at mount, in one line naming it."""
        xdg = os.path.join(self.tmp, "xdg")
        os.makedirs(os.path.join(xdg, "ggufs"), 0o700)
        os.chown(os.path.join(xdg, "ggufs"), gm.NOBODY, gm.NOBODY)
        mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(mnt)
        with FaultServer({PATH: self.data}) as s:
            env = env_without_token(XDG_CACHE_HOME=xdg)
            try:
                r = subprocess.run([gm.GGUFS, s.url + PATH, mnt], env=env,
                                   capture_output=True, timeout=WAIT)
            finally:
                if gm.is_mounted(mnt):
                    gm.unmount(mnt)
        err = r.stderr.decode()
        self.assertEqual(r.returncode, 1, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("cache_dir %s: owned by uid %d" % (os.path.join(xdg, "ggufs"), gm.NOBODY),
                      err)

    def test_split_model_every_shard_cached(self):
        shards = split_gguf(TINY, self.tmp, "tiny", 3)
        files = {"/s/" + os.path.basename(p): gm.read_file(p) for p in shards}
        first = "/s/" + os.path.basename(shards[0])
        with FaultServer(files) as s:
            with EnvMount(s.url + first, self.opts()) as m:
                self.read_all(m)
            self.assertEqual(len(entries(self.cache)), 3, "an entry per shard")
            self.assertGreater(len(data_requests(s.log_settled(4))), 0, "data was fetched")
            clear_when_quiet(s)
            with EnvMount(s.url + first, self.opts()) as m:
                self.read_all(m)
            log = s.log_settled(3)
        self.assertEqual(len(log), 3, [(r.path, r.range) for r in log])
        self.assertEqual(data_requests(log), [], "the second mount fetched data")

    def test_refused_arguments(self):
        mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(mnt)
        afile = os.path.join(self.tmp, "afile")
        open(afile, "w").close()
        with FaultServer({PATH: self.data}) as s:
            for bad, why in ((os.path.join(self.tmp, "no", "such"), "No such file"),
                             (afile, "Not a directory")):
                r = gm.run_ggufs(["-o", "cache_dir=" + bad, s.url + PATH, mnt])
                self.assertEqual(r.returncode, 1, r.stderr)
                lines = r.stderr.decode().splitlines()
                self.assertEqual(len(lines), 1, lines)
                self.assertIn("cache_dir " + bad, lines[0])
                self.assertIn(why, lines[0])
                self.assertFalse(gm.is_mounted(mnt))
            r = gm.run_ggufs(["-o", "cache_max=12Q", s.url + PATH, mnt])
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("cache_max=12Q", r.stderr.decode())
            self.assertEqual(s.log(), [], "refused before any request")
        os.rmdir(mnt)


if __name__ == "__main__":
    gm.main()
