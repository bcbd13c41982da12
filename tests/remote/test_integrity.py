#!/usr/bin/env python3
"""Never a wrong byte from a remote model (issue 20): a hostile neighbour and a broken or
hostile server against the disk cache, the response checks and the time and memory
bounds. Each test stands for one item of the issue:
- cache_dir: a symlink, another user's directory or one that others may write to is
  refused at mount; an entry inside that another user owns is never served (made
  afresh); eviction never follows a symlink planted in the directory;
- the block checksum: every pair of bits flipped among a few positions of a block on
  disk gets the block fetched again;
- a reply with a Content-Encoding (gzip) is refused at mount and fails a read, none of it
  cached; a reply whose Content-Length says it is cut short puts none of its blocks in a
  cache;
- the disk cache's key holds the query (hashed): ?f=a and ?f=b never share an entry;
- a reply without the ETag pinned (or Last-Modified) is another version: EIO;
- a size claimed beyond 4 TiB is refused at mount, and one within sizes neither the
  mount's memory nor its cache entry's files;
- a server that drips 8 bytes a second refuses a mount and fails a read within the
  stall bound (4 x timeout);
- a stalled server fails a buffered read within 4 x timeout (the kernel's second READ
  of a block that just failed fails at once);
- a cache_max smaller than what cache_dir holds is met at mount;
- user:password@ and the query of a URL are scrubbed from the daemon's command line;
- a token_file with a NUL byte, or readable by group or others, is refused;
- an https mount never follows a redirect to plain http;
- response headers over libcurl's limit are said to be too large (not "Out of
  memory"), and a control byte in an hf:// name is blamed on the name, not HF_ENDPOINT.
Reads run in child processes with deadlines where a hang could happen."""
import errno
import os
import shutil
import tempfile
import time
import unittest

from remote_common import (TinyCase, TINY, Body, check_raw_files, EnvMount, FaultServer, gm, read_bounded)

PATH = "/models/tinyllama-q4km.gguf"
BLOCK = 128 << 10
WAIT = 30.0
FAILED_HOLD = 2.1   # s: the man page's hold of a block whose fetch failed


def entries(d):
    """The entry directories of the cache d."""
    return sorted(n for n in os.listdir(d) if len(n) == 32 and os.path.isdir(os.path.join(d, n)))


def stored_blocks(entry_dir):
    """How many blocks the map of an entry records (non-zero 32-byte records)."""
    with open(os.path.join(entry_dir, "map"), "rb") as f:
        f.seek(4096)
        recs = f.read()
    return sum(1 for i in range(0, len(recs) - 31, 32) if any(recs[i:i + 32]))


def chown_tree(path, uid):
    """Gives path and everything under it to uid (gid too), symlinks themselves."""
    os.lchown(path, uid, uid)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, uid)


class Base(TinyCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # one block of tensor data with every byte inverted: another version's bytes
        # (in output.weight, past the header's 1 MiB prefix, which is never re-read)
        a, e = cls.extents["output.weight"]
        cls.bad_block = max(-(-a // BLOCK), (1 << 20) // BLOCK) + 1
        assert (cls.bad_block + 1) * BLOCK <= e
        b = bytearray(cls.data)
        lo, hi = cls.bad_block * BLOCK, min(len(b), (cls.bad_block + 1) * BLOCK)
        b[lo:hi] = bytes(x ^ 0xFF for x in b[lo:hi])
        cls.poisoned = bytes(b)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ggufs-integrity-")
        self.cache = os.path.join(self.tmp, "cache")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def read_all(self, m, data=None):
        """Reads every tensor's raw file and checks its bytes against data (the local
        file's by default)."""
        check_raw_files(self, m, self.data if data is None else data, self.extents)

    def refused(self, args, *words):
        """Runs ggufs on args (model and options; a mount point is added) and checks it
        exits 1 with one line naming every one of words, nothing mounted. The line."""
        mnt = os.path.join(self.tmp, "mnt")
        os.makedirs(mnt, exist_ok=True)
        r = gm.run_ggufs(list(args) + [mnt], timeout=60)
        err = r.stderr.decode(errors="replace")
        if gm.is_mounted(mnt):
            gm.unmount(mnt)
            self.fail("mounted: " + err)
        self.assertEqual(r.returncode, 1, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        for w in words:
            self.assertIn(w, err)
        return err

    def poison(self, s, cache):
        """A cache entry for s's PATH that holds the poisoned bytes under the ETag the
        server now gives the right ones (a neighbour's work: a mount of another file
        that a server gave the same size and ETag). Returns the entry's directory."""
        good = s.file(PATH).content
        s.force_etag = '"v1"'
        s.swap(PATH, self.poisoned)
        with EnvMount(s.url + PATH, ["-o", "cache_dir=" + cache]) as m:
            self.read_all(m, self.poisoned)
        s.swap(PATH, bytes(good))
        (entry,) = entries(cache)
        return os.path.join(cache, entry)


class CacheDir(Base):
    def test_symlink_refused(self):
        real = os.path.join(self.tmp, "real")
        os.mkdir(real, 0o700)
        os.symlink(real, self.cache)
        with FaultServer({PATH: self.data}) as s:
            self.refused(["-o", "cache_dir=" + self.cache, s.url + PATH], "symlink", self.cache)
        self.assertEqual(os.listdir(real), [], "nothing written through the symlink")

    def test_group_or_other_writable_refused(self):
        with FaultServer({PATH: self.data}) as s:
            self.poison(s, self.cache)
            os.chmod(self.cache, 0o777)   # what a neighbour's pre-made /tmp directory is
            self.refused(["-o", "cache_dir=" + self.cache, s.url + PATH], "writable", "0777")

    def test_other_owner_refused(self):
        with FaultServer({PATH: self.data}) as s:
            self.poison(s, self.cache)
            chown_tree(self.cache, gm.NOBODY)
            os.chmod(self.tmp, 0o755)
            self.refused(["-o", "cache_dir=" + self.cache, s.url + PATH], "owned by uid %d" % gm.NOBODY)

    def test_entry_of_another_user_not_served(self):
        with FaultServer({PATH: self.data}) as s:
            edir = self.poison(s, self.cache)
            chown_tree(edir, gm.NOBODY)   # the entry is nobody's; the directory is ours
            with EnvMount(s.url + PATH, ["-o", "cache_dir=" + self.cache]) as m:
                self.read_all(m)
            self.assertEqual(os.stat(edir).st_uid, os.geteuid(), "the entry made afresh")
            # and a data file that others may write to: the same
            os.chmod(os.path.join(edir, "data"), 0o666)
            with open(os.path.join(edir, "data"), "r+b") as f:
                f.seek(self.bad_block * BLOCK)
                f.write(self.poisoned[self.bad_block * BLOCK:(self.bad_block + 1) * BLOCK])
            with EnvMount(s.url + PATH, ["-o", "cache_dir=" + self.cache]) as m:
                self.read_all(m)

    def test_eviction_does_not_follow_a_symlink(self):
        other = os.path.join(self.tmp, "other")   # another cache of the same user
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH, ["-o", "cache_dir=" + other]) as m:
                self.read_all(m)
            (victim,) = entries(other)
            vdir = os.path.join(other, victim)
            before = stored_blocks(vdir)
            with open(os.path.join(vdir, "data"), "rb") as f:
                vdata = f.read()
            self.assertGreater(before, 4)
            os.mkdir(self.cache, 0o700)
            os.symlink(vdir, os.path.join(self.cache, "0" * 32))
            s.swap(PATH, self.poisoned)   # another version: a new entry, room made for it
            with EnvMount(s.url + PATH, ["-o", "cache_dir=" + self.cache,
                                         "-o", "cache_max=1M"]) as m:
                self.read_all(m, self.poisoned)
            self.assertEqual(stored_blocks(vdir), before, "the other cache's records")
            with open(os.path.join(vdir, "data"), "rb") as f:
                self.assertTrue(f.read() == vdata, "the other cache's bytes")
            self.assertFalse(os.path.lexists(os.path.join(self.cache, "0" * 32)),
                             "the planted symlink itself is removed")


class Checksum(Base):
    def test_every_two_bit_error_refetched(self):
        """Block k of output.weight, cached on disk; then, for every pair of bits of its
        bytes 7 and 15 (where FNV-1a over words cancelled), the pair flipped on disk, the
        block pushed out of the 4-block memory cache by four others, and read again:
        the right bytes, fetched again, every time."""
        a, e = self.extents["output.weight"]
        k = max(-(-a // BLOCK), (1 << 20) // BLOCK)   # past the header's 1 MiB prefix
        self.assertLessEqual((k + 6) * BLOCK, e)
        tensor_off = k * BLOCK - a
        want = self.data[k * BLOCK:k * BLOCK + 4096]
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH, ["-o", "cache_dir=" + self.cache,
                                         "-o", "cache_size=512K"]) as m:
                path = m.p("tensors", "output.weight")
                for j in range(6):   # block k and the four that push it out, on disk
                    gm.pread_direct(path, 4096, tensor_off + j * BLOCK)
                (entry,) = entries(self.cache)
                data_file = os.path.join(self.cache, entry, "data")
                bits = [byte * 8 + b for byte in (7, 15) for b in range(8)]
                pairs = [(x, y) for i, x in enumerate(bits) for y in bits[i + 1:]]
                refetched = 0
                for x, y in pairs:
                    with open(data_file, "r+b") as f:
                        for bit in (x, y):
                            f.seek(k * BLOCK + bit // 8)
                            v = f.read(1)[0] ^ (1 << (bit % 8))
                            f.seek(k * BLOCK + bit // 8)
                            f.write(bytes([v]))
                    for j in range(1, 5):
                        gm.pread_direct(path, 4096, tensor_off + j * BLOCK)
                    s.clear_log()
                    got = gm.pread_direct(path, 4096, tensor_off)
                    self.assertTrue(got == want, "bits %d and %d flipped: wrong bytes" % (x, y))
                    asked = [r.range for r in s.log_settled(1, timeout=2)]
                    refetched += "bytes=%d-%d" % (k * BLOCK, (k + 1) * BLOCK - 1) in asked
                self.assertEqual(refetched, len(pairs), "a refetch for every pair")


class Responses(Base):
    def big_read(self, m, blocks=4):
        """(errno, bytes) of a read of `blocks` blocks of output.weight past the header's
        prefix, block-aligned in the file, and the file offset it starts at."""
        a, e = self.extents["output.weight"]
        k = max(-(-a // BLOCK), (1 << 20) // BLOCK)
        self.assertLessEqual((k + blocks) * BLOCK, e)
        err, got, _ = read_bounded(m.p("tensors", "output.weight"), k * BLOCK - a,
                                   blocks * BLOCK, WAIT)
        return err, got, k * BLOCK

    def test_encoded_reply_refused(self):
        with FaultServer({PATH: self.data}) as s:
            s.content_encoding = "gzip"
            self.refused([s.url + PATH], "Content-Encoding: gzip")
            s.content_encoding = None
            with EnvMount(s.url + PATH, ["-o", "cache_dir=" + self.cache]) as m:
                s.content_encoding = "gzip"
                err, got, _ = self.big_read(m)
                self.assertEqual(err, errno.EIO, "an encoded body is never the file's bytes")
            self.assertTrue(all(r.headers.get("accept-encoding") == "identity" for r in s.log()),
                            "Accept-Encoding: identity on every request")
            (entry,) = entries(self.cache)
            self.assertEqual(stored_blocks(os.path.join(self.cache, entry)), 0)
            s.content_encoding = None   # the server fixed: a remount serves the file's bytes
            with EnvMount(s.url + PATH, ["-o", "cache_dir=" + self.cache]) as m:
                self.read_all(m)

    def test_cut_short_reply_reaches_no_cache(self):
        """Every answer carries half the range asked, with a Content-Length that says so
        under the full Content-Range: the read fails, and none of its blocks reached the
        disk cache (or the memory cache: they are asked for again)."""
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH, ["-o", "cache_dir=" + self.cache, "-o", "timeout=2"]) as m:
                s.truncate_next(1000)
                err, _, at = self.big_read(m)
                self.assertEqual(err, errno.EIO)
                (entry,) = entries(self.cache)
                self.assertEqual(stored_blocks(os.path.join(self.cache, entry)), 0,
                                 "blocks of a reply known cut short were cached")
                s.clear_failures()
                time.sleep(FAILED_HOLD)   # blocks that just failed fail at once till then
                s.clear_log()
                err, got, at = self.big_read(m)
                self.assertEqual(err, 0)
                self.assertTrue(got == self.data[at:at + len(got)])
                self.assertIn("bytes=%d-" % at, " ".join(r.range for r in s.log_settled(1)),
                              "the first block fetched again, not kept from the cut reply")


class Pin(Base):
    def test_missing_etag_is_a_mismatch(self):
        """Mounted with an ETag pinned; then the server swaps the file (same size), drops
        its ETag, gives a new Last-Modified and ignores If-Match: EIO and the "changed"
        line, never the other version's bytes."""
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH) as m:
                s.ignore_if_match = True
                s.omit_etag = True
                s.mtime += 3600
                s.swap(PATH, self.poisoned)
                a, _ = self.extents["output.weight"]
                k = self.bad_block
                err, got, _ = read_bounded(m.p("tensors", "output.weight"), k * BLOCK - a,
                                           4096, WAIT)
                self.assertEqual(err, errno.EIO, "another version's bytes served")
                self.assertIn("changed on the server", m.stderr())
                self.assertIn("ETag none", m.stderr())


class CacheKey(Base):
    def test_query_is_part_of_the_key(self):
        """?f=a and ?f=b of one path, the same size and ETag: two entries, and b's mount
        serves b's bytes; no query is written in the cache."""
        with FaultServer({PATH + "?f=a&sig=SECRETa": self.data,
                          PATH + "?f=b&sig=SECRETb": self.poisoned}) as s:
            s.by_query = True
            s.force_etag = '"same"'
            opts = ["-o", "cache_dir=" + self.cache]
            with EnvMount(s.url + PATH + "?f=a&sig=SECRETa", opts) as m:
                self.read_all(m)
            with EnvMount(s.url + PATH + "?f=b&sig=SECRETb", opts) as m:
                self.read_all(m, self.poisoned)
            with EnvMount(s.url + PATH + "?f=a&sig=SECRETa", opts) as m:
                self.read_all(m)
        self.assertEqual(len(entries(self.cache)), 2)
        for d, _, files in os.walk(self.cache):
            for name in files:
                with open(os.path.join(d, name), "rb") as f:
                    self.assertNotIn(b"SECRET", f.read())


class Bounds(Base):
    TIMEOUT = 2
    BOUND = 4 * TIMEOUT   # the man page's: no attempt starts after 3 x timeout

    def drip(self, s):
        """The server sends 8 bytes a second, one at a time, from now on."""
        s.chunk, s.rate = 1, 8

    def test_drip_refuses_the_mount_in_bound(self):
        with FaultServer({PATH: self.data}) as s:
            self.drip(s)
            start = time.monotonic()
            self.refused(["-o", "timeout=%d" % self.TIMEOUT, s.url + PATH], "too slow")
            took = time.monotonic() - start
        print("a dripping server refused the mount in %.1f s" % took)
        self.assertLess(took, self.BOUND + 5)

    def test_drip_fails_a_read_in_bound(self):
        a, _ = self.extents["output.weight"]
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH, ["-o", "timeout=%d" % self.TIMEOUT]) as m:
                self.drip(s)
                try:
                    err, _, took = read_bounded(m.p("tensors", "output.weight"),
                                                self.bad_block * BLOCK - a, 4096, WAIT)
                finally:
                    s.closing.set()   # ends the drip: the daemon can end its transfer
                    s.rate = None
        print("a dripping server failed a read in %.1f s" % took)
        self.assertEqual(err, errno.EIO)
        self.assertLess(took, self.BOUND + 5)


class Stall(Base):
    def test_stall_eio_within_the_bound(self):
        """A buffered read (the kernel's read-ahead READ, then its READ again for the
        page when that fails) on a stalled server: EIO within 4 x timeout, not twice
        that."""
        timeout = 3
        a, _ = self.extents["output.weight"]
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH, ["-o", "timeout=%d" % timeout]) as m:
                s.stall = True
                try:
                    err, _, took = read_bounded(m.p("tensors", "output.weight"),
                                                self.bad_block * BLOCK - a, 4096, WAIT * 2,
                                                direct=False)
                finally:
                    s.stall = False
        print("a stalled server failed a buffered read in %.1f s" % took)
        self.assertEqual(err, errno.EIO)
        self.assertLess(took, 4 * timeout + 3)


class ClaimedSize(Base):
    def test_claim_beyond_the_limit_refused(self):
        with FaultServer({PATH: Body(self.data, 1 << 43)}) as s:
            self.refused(["-o", "cache_dir=" + self.cache, s.url + PATH], "claims", "4 TiB")
        self.assertEqual(entries(self.cache) if os.path.isdir(self.cache) else [], [])

    def test_claim_sizes_nothing(self):
        """4 TiB claimed (the limit), the model's bytes at its start: the mount's memory
        and its cache entry's files follow what is cached, not the claim."""
        with FaultServer({PATH: Body(self.data, 4 << 40)}) as s:
            with EnvMount(s.url + PATH, ["-o", "cache_dir=" + self.cache]) as m:
                self.read_all(m)
                rss = gm.proc_status(m.proc.pid, "VmRSS")
            (entry,) = entries(self.cache)
            sizes = {n: os.stat(os.path.join(self.cache, entry, n)).st_size
                     for n in ("data", "map")}
        print("4 TiB claimed: RSS %d MiB, files %r" % (rss >> 20, sizes))
        self.assertLess(rss, 128 << 20)
        self.assertLess(sizes["data"], 64 << 20)
        self.assertLess(sizes["map"], 1 << 20)


class Downgrade(Base):
    def test_https_never_redirected_to_http(self):
        """An https server redirects to plain http (another server with the same file):
        the mount is refused, and no request reaches the http server."""
        with FaultServer({PATH: self.data}) as plain, \
                FaultServer({PATH: self.data}, https=True) as tls:
            tls.redirect_to = plain.url
            self.refused(["-o", "cafile=" + tls.cafile, tls.url + PATH], "https", "plain http")
            self.assertEqual(plain.log(), [], "a request went out in clear text")
            tls.redirect_to = None   # mounts without the redirect: the server itself works
            with EnvMount(tls.url + PATH, ["-o", "cafile=" + tls.cafile]) as m:
                self.read_all(m)


def disk_usage(d):
    """Bytes that everything under d takes on disk (st_blocks), as ggufs bounds it."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(d):
        for name in dirnames + filenames:
            total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


class CacheMax(Base):
    def test_trimmed_at_mount(self):
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH, ["-o", "cache_dir=" + self.cache]) as m:
                self.read_all(m)
            full = disk_usage(self.cache)
            self.assertGreater(full, 2 << 20)
            with EnvMount(s.url + PATH, ["-o", "cache_dir=" + self.cache,
                                         "-o", "cache_max=1M"]) as m:
                at_mount = disk_usage(self.cache)   # before any read
                self.read_all(m)
        print("cache_dir: %d KiB, %d KiB once mounted with cache_max=1M"
              % (full >> 10, at_mount >> 10))
        self.assertLessEqual(at_mount, 1 << 20)


class TokenFile(Base):
    def token_file(self, content, mode):
        path = os.path.join(self.tmp, "token")
        with open(path, "wb") as f:
            f.write(content)
        os.chmod(path, mode)
        return path

    def test_nul_refused(self):
        with FaultServer({PATH: self.data}) as s:
            s.token = "tok"
            path = self.token_file(b"tok\0en\n", 0o600)
            err = self.refused(["-o", "token_file=" + path, s.url + PATH], "NUL")
            self.assertEqual(s.log(), [], "no request with a token cut short")
            self.assertNotIn("tok", err.replace("token", ""))

    def test_readable_by_others_refused(self):
        with FaultServer({PATH: self.data}) as s:
            s.token = "tok"
            for mode in (0o644, 0o640, 0o604):
                path = self.token_file(b"tok\n", mode)
                self.refused(["-o", "token_file=" + path, s.url + PATH],
                             "readable by group or others", "%04o" % mode)
            self.assertEqual(s.log(), [])
            path = self.token_file(b"tok\n", 0o600)
            with EnvMount(s.url + PATH, ["-o", "token_file=" + path]) as m:
                self.read_all(m)


class Cmdline(Base):
    def test_credentials_scrubbed_from_argv(self):
        """user:password@ and a ?sig= query of the URL are not in the daemon's
        /proc/PID/cmdline, which every user can read, while it serves."""
        with FaultServer({PATH: self.data}) as s:
            url = s.url.replace("://", "://someone:PASSWORDx@") + PATH + "?sig=SIGNATUREx"
            with EnvMount(url) as m:
                self.read_all(m)
                with open("/proc/%d/cmdline" % m.proc.pid, "rb") as f:
                    cmdline = f.read()
                self.assertIn(s.url.encode().split(b"//")[1] + PATH.encode(), cmdline)
                # nor in the root's counters, which every reader of the mount can list
                attrs = b"".join(os.getxattr(m.path, a) for a in os.listxattr(m.path))
                self.assertIn(b"/" + PATH.encode().split(b"/")[-1], attrs)
                for secret in (b"PASSWORDx", b"SIGNATUREx", b"someone"):
                    self.assertNotIn(secret, cmdline)
                    self.assertNotIn(secret, attrs)


class Messages(Base):
    def test_huge_response_headers(self):
        with FaultServer({PATH: self.data}) as s:
            s.extra_headers = [("X-Padding", "a" * 200000)]
            err = self.refused([s.url + PATH], "response headers are too large")
            self.assertNotIn("Out of memory", err)

    def test_control_byte_in_an_hf_name(self):
        with FaultServer({PATH: self.data}) as s:
            env = dict(os.environ, HF_ENDPOINT=s.url)
            env.pop("HF_TOKEN", None)
            mnt = os.path.join(self.tmp, "mnt")
            os.mkdir(mnt)
            r = gm.run_ggufs(["hf://o/r/m\x7f.gguf", mnt], env=env)
            err = r.stderr.decode(errors="replace")
            self.assertFalse(gm.is_mounted(mnt))
            self.assertEqual(r.returncode, 1, err)
            self.assertIn("control bytes", err)
            self.assertNotIn("HF_ENDPOINT", err)


if __name__ == "__main__":
    gm.main()
