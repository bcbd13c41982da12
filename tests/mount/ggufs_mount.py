"""Mounting ggufs for real in the end-to-end tests.

Every test script is run by meson as `python3 SCRIPT GGUFS_BINARY`, with GGUFS_TEST_DATA
pointing at tests/data. A script exits 77 (meson's "skipped") only when /dev/fuse is
absent; anything else that goes wrong is a failure.

The daemon runs with -f as a child of the test, so that its exit status and stderr can
be checked after unmounting: a sanitizer report or a non-zero exit fails the test even
when every read was right. Daemon mode itself (no -f) is tested in test_cli.py.
"""
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

GGUFS = None
DIFF_PAIR = None  # tests/diff_pair, for the scripts that ask setup for it
DATA = os.environ.get("GGUFS_TEST_DATA", os.path.join(os.path.dirname(__file__), "..", "data"))
TINY = os.path.join(DATA, "tinyllama-q4km.gguf")
TINY_EXPECTED = os.path.join(DATA, "tinyllama-q4km.expected.json")
VECTORS = os.path.join(DATA, "vectors")

MOUNT_TIMEOUT = 20.0
SANITIZER_MARKS = (b"Sanitizer", b"runtime error:", b"LeakSanitizer")


REMOTE_PREFIXES = ("http://", "https://", "hf://", "s3://")


# What a mount in the background says on stderr where nothing listens on /dev/log
# (report.c report_warn_unheard), the one line of a mount that went well there.
UNHEARD_LINE = ("ggufs: warning: no syslog listens on /dev/log here, so the mount's events "
                "(refused edits, failed reads) would be lost: mount with -o log=FILE to "
                "keep them\n")


def syslog_listens():
    """True when something listens on /dev/log, as the daemon checks."""
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.connect("/dev/log")
        return True
    except OSError:
        return False
    finally:
        s.close()


def background_stderr():
    """What a mount in the background that went well says on stderr here: nothing, or
    UNHEARD_LINE where nothing listens on /dev/log."""
    return "" if syslog_listens() else UNHEARD_LINE


def isolated(args):
    """args with -o cache_dir=none added when they name a remote model without saying
    where its disk cache goes: a test's mounts and checks never share the default disk
    cache (each test that wants one says so)."""
    args = list(args)
    if any(str(a).lower().startswith(REMOTE_PREFIXES) for a in args) and \
            not any("cache_dir=" in str(a) for a in args):
        args = ["-o", "cache_dir=none"] + args
    return args


def setup(diff_pair=False):
    """Reads the binary path from argv and skips the whole script without /dev/fuse.
    The script gets a cache home of its own (XDG_CACHE_HOME), removed at exit, so that
    no default disk cache outside it is written or read. With diff_pair, the script is
    run as `SCRIPT GGUFS DIFF_PAIR`: the next argument is tests/diff_pair (make_pair)."""
    global GGUFS, DIFF_PAIR
    import atexit
    import shutil
    cache_home = tempfile.mkdtemp(prefix="ggufs-test-xdg-")
    os.environ["XDG_CACHE_HOME"] = cache_home
    atexit.register(shutil.rmtree, cache_home, True)
    if len(sys.argv) < 2:
        sys.exit("usage: %s PATH_TO_GGUFS [unittest args]" % sys.argv[0])
    GGUFS = os.path.abspath(sys.argv.pop(1))
    if not os.path.exists("/dev/fuse"):
        print("/dev/fuse is absent: skipping", file=sys.stderr)
        sys.exit(77)
    if diff_pair:
        DIFF_PAIR = os.path.abspath(sys.argv.pop(1))


def main(what=None, missing=None, diff_pair=False):
    """Runs the script's tests. what, missing: a tool they need ("llama") and why it is
    absent (None: it is there); without it the script is skipped, or fails where
    GGUFS_REQUIRE_<WHAT> is set (CI requires it). diff_pair: as setup's."""
    if missing:
        if os.environ.get("GGUFS_REQUIRE_" + what.upper()):
            sys.exit("%s tests required (GGUFS_REQUIRE_%s) but %s" % (what, what.upper(), missing))
        print(missing + ": skipping", file=sys.stderr)
        sys.exit(77)
    setup(diff_pair)
    unittest.main(verbosity=2)


def tasks(pid):
    """How many threads process pid has now (OSError once it is gone)."""
    return len(os.listdir("/proc/%d/task" % pid))


class Peak:
    """`with Peak(pid) as p:` the most threads (p.threads) and RssAnon bytes (p.rss) of
    process pid seen while in it, sampled every 10 ms (nothing once it is gone)."""

    def __init__(self, pid):
        self.pid, self.threads, self.rss = pid, 0, 0
        self.done = threading.Event()
        self.sampler = threading.Thread(target=self.sample)

    def sample(self):
        while not self.done.is_set():
            try:
                self.threads = max(self.threads, tasks(self.pid))
                self.rss = max(self.rss, rss_anon(self.pid))
            except OSError:
                pass
            time.sleep(0.01)

    def __enter__(self):
        self.sampler.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.sampler.join()
        return False


def run_threads(threads, timeout):
    """Starts every thread, then waits for them all, timeout seconds at the most (a hang
    guard): the threads still running then (none: an empty list)."""
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return [t for t in threads if t.is_alive()]


def require(tc, what, missing):
    """Within test case tc, for a tool it needs (what: "s3rver") and why it is absent
    (missing; None: it is there): skips the case, or fails it where GGUFS_REQUIRE_<WHAT>
    is set, as main does for a whole script."""
    if missing and os.environ.get("GGUFS_REQUIRE_" + what.upper()):
        tc.fail("%s required (GGUFS_REQUIRE_%s) but %s" % (what, what.upper(), missing))
    if missing:
        tc.skipTest(missing)


def make_pair(out, *args):
    """Writes at out the partner tests/diff_pair makes of TINY, args naming its tensors'
    type and --vary: the second model of the tests of --diff and --compare."""
    subprocess.run([DIFF_PAIR, TINY, out] + list(args), check=True)


class PairsCase(unittest.TestCase):
    """A test class of --diff whose second models are made once for the class, in a
    temporary folder removed after it: PAIRS maps an attribute to (file name, make_pair's
    args), and the attribute holds that model's path."""
    PAIRS = {}

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ggufs-diff-")
        for attr, (name, args) in cls.PAIRS.items():
            setattr(cls, attr, os.path.join(cls.tmp, name))
            make_pair(getattr(cls, attr), *args)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)


def is_mounted(path):
    """True when a ggufs mount sits exactly at path (by /proc/self/mountinfo)."""
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            mnt = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
            if mnt == path:
                return True
    return False


def unmount(path):
    subprocess.run(["fusermount3", "-u", path], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if is_mounted(path):
        subprocess.run(["fusermount3", "-u", "-z", path], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_ggufs(args, timeout=MOUNT_TIMEOUT, env=None):
    """Runs ggufs to completion (for refused models and daemon mode)."""
    return subprocess.run([GGUFS] + isolated(args), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout, env=env)


def refused_mount(args, env=None, prefix="ggufs-refused-"):
    """Runs `ggufs -f ARGS MOUNTPOINT` for a mount that must not happen, on a scratch
    mount point removed after: its one stderr line, once it exited 1 having said just
    that (AssertionError otherwise)."""
    d = tempfile.mkdtemp(prefix=prefix)
    try:
        r = run_ggufs(["-f"] + list(args) + [d], env=env, timeout=60)
    finally:
        unmount(d)
        os.rmdir(d)
    err = r.stderr.decode(errors="replace")
    if r.returncode != 1 or len(err.splitlines()) != 1:
        raise AssertionError("exit %d, not 1 with one line on stderr: %r" % (r.returncode, err))
    return err


class Mount:
    """`with Mount(model) as m:` mounts model on a fresh temporary directory m.path with
    ggufs -f in the background, waits until it is mounted, and on exit unmounts it,
    waits for the daemon and checks that it exited 0 without a sanitizer report."""

    def __init__(self, model, opts=(), mountpoint=None, default_cache=False):
        self.model = model
        self.opts = list(opts)
        self.default_cache = default_cache   # a remote model's default disk cache on
        if mountpoint:  # the caller's, left in place
            self.dir = None
            self.path = mountpoint
        else:
            self.dir = public_tmpdir()  # so that other users reach the mount point
            self.path = os.path.join(self.dir, "mnt")
            os.mkdir(self.path)
        self.proc = None
        self.errfile = None

    def __enter__(self):
        self.errfile = tempfile.TemporaryFile()
        args = self.opts + [self.model]
        self.proc = subprocess.Popen([GGUFS, "-f"] + (args if self.default_cache else
                                                      isolated(args)) + [self.path],
                                     stdin=subprocess.DEVNULL, stdout=self.errfile,
                                     stderr=self.errfile)
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not is_mounted(self.path):
            if self.proc.poll() is not None:
                raise AssertionError("ggufs exited %d before mounting: %s"
                                     % (self.proc.returncode, self.stderr()))
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError("ggufs did not mount within %g s" % MOUNT_TIMEOUT)
            time.sleep(0.02)
        return self

    def stderr(self):
        self.errfile.seek(0)
        return self.errfile.read().decode(errors="replace")

    def __exit__(self, *exc):
        try:
            unmount(self.path)
            try:
                rc = self.proc.wait(timeout=MOUNT_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("ggufs did not exit after unmount")
            self.errfile.seek(0)
            err = self.errfile.read()
            if exc[0] is None:
                if any(mark in err for mark in SANITIZER_MARKS):
                    raise AssertionError("sanitizer report from ggufs:\n" + err.decode(errors="replace"))
                if rc != 0:
                    raise AssertionError("ggufs exited %d: %s" % (rc, err.decode(errors="replace")))
        finally:
            self.errfile.close()
            if self.dir and not is_mounted(self.path):
                os.rmdir(self.path)
                os.rmdir(self.dir)
        return False

    def p(self, *parts):
        return os.path.join(self.path, *parts)


class MountedTestCase(unittest.TestCase):
    """One mount of MODEL shared by every test of the class."""
    MODEL = None
    OPTS = ()

    @classmethod
    def setUpClass(cls):
        cls.mount = Mount(cls.MODEL, cls.OPTS)
        cls.mount.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.mount.__exit__(None, None, None)

    def p(self, *parts):
        return self.mount.p(*parts)


NOBODY = 65534  # uid and gid of nobody / nogroup on Debian


def drop_to_nobody(uid=NOBODY):
    """In a child (forked, or a subprocess's preexec_fn): become uid and gid 65534
    (or uid), with no supplementary groups."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def errno_as_nobody(fn, *args, uid=NOBODY):
    """Runs fn(*args) in a forked child as nobody (or uid): 0 when it returns, the
    errno of the OSError it raised, or 255 for anything else."""
    pid = os.fork()
    if pid == 0:
        code = 255
        try:
            drop_to_nobody(uid)
            fn(*args)
            code = 0
        except OSError as e:
            code = e.errno if e.errno and e.errno < 255 else 255
        except BaseException:
            pass
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def public_tmpdir():
    """A temporary directory that other users may enter (mkdtemp's are 0700)."""
    d = tempfile.mkdtemp(prefix="ggufs-test-")
    os.chmod(d, 0o755)
    return d


class ScratchCase(unittest.TestCase):
    """A test with a fresh directory self.tmp of its own (prefix; with public, one that
    others may enter), removed at its end, holding an empty folder per entry of `folders`
    (attribute: its name in self.tmp). A mount still on self.mnt at the end is unmounted
    first; with must_not_mount, it also fails the test."""

    prefix = "ggufs-test-"
    public = False
    folders = {"mnt": "mnt"}
    must_not_mount = False

    def setUp(self):
        self.tmp = public_tmpdir() if self.public else tempfile.mkdtemp(prefix=self.prefix)
        for attr, name in self.folders.items():
            setattr(self, attr, os.path.join(self.tmp, name))
            os.mkdir(getattr(self, attr))

    def tearDown(self):
        mnt = getattr(self, "mnt", None)
        mounted = mnt is not None and is_mounted(mnt)
        if mounted:
            unmount(mnt)
        shutil.rmtree(self.tmp)
        if mounted and self.must_not_mount:
            self.fail("something was mounted")


class RefusedMountCase(ScratchCase):
    """A test of mounts that must not happen: each test gets a fresh mount point,
    self.mnt in self.tmp (a directory others may enter), and fails if anything is
    mounted there at its end."""

    public = True
    must_not_mount = True


class EditsCase(ScratchCase):
    """A test of mounts with edits: self.file, the edits file's path, is in the test's
    own folder (self.tmp), and mount() mounts a model with it."""

    folders = {}

    def setUp(self):
        super().setUp()
        self.file = os.path.join(self.tmp, "fix.json")

    def mount(self, model=TINY, opts=()):
        return Mount(model, ["-o", "edits=" + self.file] + list(opts))


@contextlib.contextmanager
def model_copy(prefix, model=None):
    """A copy of model (None: TINY) as m.gguf in a fresh directory, removed after: its
    path and its bytes, for a test that changes the file under a mount."""
    d = tempfile.mkdtemp(prefix=prefix)
    try:
        path = os.path.join(d, "m.gguf")
        shutil.copyfile(model or TINY, path)
        yield path, read_file(path)
    finally:
        shutil.rmtree(d)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def put(path, data, flags=os.O_WRONLY | os.O_TRUNC):
    """Writes data to path in one open and one close (errors of either raised): to a
    mount, one write between an open and a release, which is when an edit commits."""
    fd = os.open(path, flags)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def pread_direct(path, length, offset, direct=True):
    """pread with O_DIRECT: the kernel passes the exact (offset, length) to the daemon
    instead of whole cached pages, so unaligned ranges reach the tree as asked (with
    direct false, a plain pread through the page cache). Short only at the end."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    try:
        out = b""
        while len(out) < length:
            b = os.pread(fd, length - len(out), offset + len(out))
            if not b:
                break
            out += b
        return out
    finally:
        os.close(fd)


def sha256_file(path, piece=1 << 20):
    """The sha256 (hex) of the file at path, read in pieces of piece bytes (a loader's
    large sequential reads)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(piece), b""):
            h.update(b)
    return h.hexdigest()


def drop_pages(path):
    """Writes path's dirty pages and drops all of its pages from the page cache (this
    file only), so that its next read is a cold one. On a mount, what the daemon serves
    is read again from it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def proc_status(pid, field, gone=None):
    """field ("RssAnon", "VmRSS") of /proc/PID/status in bytes (the kernel writes kB).
    A process that is gone gives gone, or raises OSError when gone is None; a field the
    kernel does not write fails the test (AssertionError)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        if gone is None:
            raise
        return gone
    raise AssertionError("no %s for process %d" % (field, pid))


def rss_anon(pid, gone=None):
    """The process's RssAnon in bytes: its own memory, not the page cache (proc_status)."""
    return proc_status(pid, "RssAnon", gone)


# ---- ggufs(1)'s renderings, written independently of lib/ ----

# The bytes a file name escapes (ggufs(1) NAMES rule 1), and those a string in an array
# does (besides other control bytes as \xHH).
NAME_ESCAPES = {0x2F: b"%2F", 0x25: b"%25", 0: b"%00"}
ARRAY_ESCAPES = {0x5C: b"\\\\", 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t"}


def escape_name(name, tensor):
    """File name of a metadata key or tensor name (bytes), ggufs(1) NAMES rules 1-3
    (no test name is long enough for rule 4)."""
    out = b"".join(NAME_ESCAPES.get(b, bytes([b])) for b in name)
    if tensor and (out.endswith(b".f32") or out.endswith(b".npy")):
        out = out[:-4] + b"%2E" + out[-3:]
    if out == b".":
        out = b"%2E"
    elif out == b"..":
        out = b"%2E%2E"
    elif out == b"":
        out = b"%"
    assert len(out) <= 200, "rule 4 is not modelled here"
    return out.decode("utf-8", "surrogateescape")


def shortest_float(v, bits):
    """The shortest %.Ng (N from 1) that reads back as the same float32/float64, bit
    for bit; an exponent form below 1e16 is written out in full instead, its digits
    padded with zeros (10000 and 500000, not 1e+04 and 5e+05), as Python's repr does."""
    import math
    import struct
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    fmt = "<f" if bits == 32 else "<d"

    def reads_back(s):
        return struct.pack(fmt, float(s)) == struct.pack(fmt, v)

    for prec in range(1, (9 if bits == 32 else 17) + 1):
        s = "%.*g" % (prec, v)
        if reads_back(s):
            break
    else:
        raise AssertionError("no shortest form for %r" % v)
    if "e+" in s:
        mantissa, exp10 = s.split("e+")
        if int(exp10) < 16:
            sign = "-" if mantissa.startswith("-") else ""
            digits = mantissa.lstrip("-").replace(".", "")
            s = sign + digits + "0" * (int(exp10) + 1 - len(digits))
            assert reads_back(s), s
    return s


def escape_array_string(s):
    """A string element inside an array, on one line (ggufs(1) metadata table)."""
    def one(b):
        if b in ARRAY_ESCAPES:
            return ARRAY_ESCAPES[b]
        return b"\\x%02x" % b if b < 0x20 or b == 0x7F else bytes([b])
    return b"".join(map(one, s))


def render_scalar(vtype, value, in_array=False):
    """One value of GGUF type vtype ("uint32", "float32", "string", ...) as its line,
    without the newline."""
    if vtype == "string":
        b = value.encode("utf-8", "surrogateescape")
        return escape_array_string(b) if in_array else b
    if vtype == "bool":
        return b"true" if value else b"false"
    if vtype == "float32":
        return shortest_float(value, 32).encode()
    if vtype == "float64":
        return shortest_float(value, 64).encode()
    return str(int(value)).encode()


# ---- hand-written GGUF files ----

GGUF_UINT32, GGUF_STRING = 4, 8
GGML_F32 = 0


def gguf_string(b):
    import struct
    if isinstance(b, str):
        b = b.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, kvs, tensors, alignment=32, order=None):
    """A GGUF v3 file. kvs: [(key, value)] with str or int (uint32) values; tensors:
    [(name, dims, ggml_type, data bytes)], each placed at the next aligned offset, their
    data in the file in the order of `order` (indices into tensors; None: as listed).
    Returns the tensors' data offsets in the file."""
    import struct
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, value in kvs:
        out += gguf_string(key)
        if isinstance(value, int):
            out += struct.pack("<II", GGUF_UINT32, value)
        else:
            out += struct.pack("<I", GGUF_STRING) + gguf_string(value)
    order = range(len(tensors)) if order is None else order
    offsets, off = [0] * len(tensors), 0
    for i in order:
        offsets[i] = off
        off += len(tensors[i][3])
        off += -off % alignment
    for (name, dims, gtype, data), toff in zip(tensors, offsets):
        out += gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", gtype, toff)
    out += b"\0" * (-len(out) % alignment)
    data_start = len(out)
    for i in order:
        out += b"\0" * (data_start + offsets[i] - len(out)) + tensors[i][3]
    with open(path, "wb") as f:
        f.write(out)
    return [data_start + o for o in offsets]


def xattr_size(path, name=None):
    """getxattr/listxattr with size 0, the size query, through libc: returns the size
    or -errno."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    p = os.fsencode(path)
    if name is None:
        r = libc.listxattr(p, None, ctypes.c_size_t(0))
    else:
        r = libc.getxattr(p, name.encode(), None, ctypes.c_size_t(0))
    return r if r >= 0 else -ctypes.get_errno()


def xattr_small(path, name, size):
    """getxattr into a buffer of size bytes: the length, or -errno (ERANGE if short)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(max(size, 1))
    r = libc.getxattr(os.fsencode(path), name.encode(), buf, ctypes.c_size_t(size))
    return r if r >= 0 else -ctypes.get_errno()


def ggufs_processes(mountpoint):
    """PIDs of ggufs daemons whose command line names mountpoint."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"ggufs") and mountpoint.encode() in argv:
            pids.append(int(pid))
    return pids
