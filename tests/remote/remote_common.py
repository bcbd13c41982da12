"""What the remote-mount tests share: the mount helpers of tests/mount (ggufs_mount),
comparing a remote mount with a local one file by file, GGUF files written here (split
shards, a 150k-vocabulary header), the requests in a server log, and reads run in a
child process so that a read that hangs fails the test instead of hanging it."""
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mount"))
sys.path.insert(0, HERE)

import ggufs_mount as gm  # noqa: E402
from fault_server import Body, FaultServer  # noqa: E402,F401
from servers import Nginx  # noqa: E402,F401

TINY = gm.TINY
ALLTYPES = os.path.join(gm.VECTORS, "alltypes.gguf")

# An error at mount must be reported within this (the connect timeout is 10 s).
REFUSE_TIMEOUT = 30.0
# A read against a failing server with -o timeout=2 must end within this.
EIO_TIMEOUT = 60.0
# s: the man page's hold of a block whose fetch failed (its reads fail at once meanwhile)
FAILED_HOLD = 2.1


def env_without_token(**extra):
    """The test's environment without HF_TOKEN or HF_ENDPOINT, plus extra."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_ENDPOINT")}
    env.update(extra)
    return env


class TinyCase(unittest.TestCase):
    """Tests of the bundled model served remotely: cls.data is its bytes, cls.extents
    its tensors' extents (tensor_extents)."""

    @classmethod
    def setUpClass(cls):
        cls.data = gm.read_file(TINY)
        cls.extents = tensor_extents(TINY)


class EnvMount(gm.Mount):
    """gm.Mount with the daemon's environment given (HF_TOKEN, HF_ENDPOINT)."""

    def __init__(self, model, opts=(), env=None, default_cache=False):
        super().__init__(model, opts, default_cache=default_cache)
        self.env = env if env is not None else env_without_token()

    def __enter__(self):
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env)
        try:
            return super().__enter__()
        finally:
            os.environ.clear()
            os.environ.update(saved)



def proc_mounts_line(path):
    """The /proc/mounts line of the mount at path, or None."""
    path = os.path.realpath(path)
    with open("/proc/mounts") as f:
        for line in f:
            if line.split()[1] == path:
                return line
    return None


# ---- comparing a remote mount with a local one ----

JSON_FILE = re.compile(rb'^\{"file": "((?:[^"\\]|\\.)*)"')


def tree_files(root):
    """{relative path: lstat} of everything under root (the root itself as '')."""
    out = {"": os.lstat(root)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, root)] = os.lstat(p)
    return out


def xattrs(path):
    """{name: value} of every extended attribute of path."""
    return {n: os.getxattr(path, n) for n in sorted(os.listxattr(path))}


def tree_xattrs(path):
    """xattrs(path) without the root's user.ggufs.* counters."""
    return {n: v for n, v in xattrs(path).items() if not n.startswith("user.ggufs.")}


def compare_mounts(tc, local_root, remote_root, remote_name, source_words):
    """Asserts that the remote mount equals the local one: the same names, types,
    modes, sizes, bytes and xattrs everywhere (but the root's counters), except that gguf.json's "file" must be
    remote_name, and summary.txt may differ in its file line and must have one more
    line naming where the model came from (containing one of source_words). Returns
    the number of files compared."""
    local, remote = tree_files(local_root), tree_files(remote_root)
    tc.assertEqual(sorted(remote), sorted(local), "the same names")
    tc.assertGreater(len(local), 20, "a whole tree to compare")
    for rel, ls in local.items():
        rs = remote[rel]
        tc.assertEqual(rs.st_mode, ls.st_mode, rel)
        lp, rp = os.path.join(local_root, rel), os.path.join(remote_root, rel)
        # the root's live counters (user.ggufs.*) are the mount's own, not the tree's
        tc.assertEqual(tree_xattrs(rp), tree_xattrs(lp), "xattrs of " + rel)
        if not os.path.isfile(lp):
            continue
        lb, rb = gm.read_file(lp), gm.read_file(rp)
        tc.assertEqual(len(rb), rs.st_size, "st_size of %s is its length" % rel)
        if rel == "gguf.json":
            m = JSON_FILE.match(rb)
            tc.assertIsNotNone(m, "gguf.json starts with its file")
            tc.assertEqual(m.group(1).decode(), remote_name)
            lb, rb = JSON_FILE.sub(b'{"file": ""', lb), JSON_FILE.sub(b'{"file": ""', rb)
            tc.assertEqual(rb, lb, "gguf.json apart from its file")
        elif rel == "summary.txt":
            compare_summary(tc, lb.decode(), rb.decode(), remote_name, source_words)
        else:
            tc.assertEqual(rs.st_size, ls.st_size, "size of " + rel)
            if rb != lb:
                i = next((i for i in range(min(len(lb), len(rb))) if lb[i] != rb[i]),
                         min(len(lb), len(rb)))
                tc.fail("%s differs from byte %d (%d bytes remote, %d local)"
                        % (rel, i, len(rb), len(lb)))
    return len(local)


def compare_summary(tc, local, remote, remote_name, source_words):
    """summary.txt: the remote one is the local one with its file line naming
    remote_name and one added line naming the source."""
    def is_file_line(line):
        return line.startswith("file:")
    lines_l, lines_r = local.splitlines(), remote.splitlines()
    extra = [l for l in lines_r if l not in lines_l and not is_file_line(l)]
    tc.assertEqual(len(extra), 1, "one added line saying where the model came from: %r" % extra)
    tc.assertTrue(any(w in extra[0] for w in source_words),
                  "%r names the source (one of %r)" % (extra[0], source_words))
    file_r = [l for l in lines_r if is_file_line(l)]
    tc.assertEqual(len(file_r), 1, remote)
    tc.assertTrue(file_r[0].rstrip().endswith(remote_name), file_r[0])
    tc.assertEqual([l for l in lines_r if l != extra[0] and not is_file_line(l)],
                   [l for l in lines_l if not is_file_line(l)], "summary.txt otherwise equal")


# ---- GGUF files written here ----

TYPE_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
T_UINT16, T_INT32, T_UINT32, T_STRING, T_ARRAY = 2, 5, 4, 8, 9


class Reader:
    """Little-endian GGUF fields read one after another from bytes."""

    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        """The next struct fmt (one value, or a tuple)."""
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        """The next GGUF string (u64 length, bytes)."""
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def skip_value(self, vtype):
        """Steps over one value of GGUF type vtype (arrays included)."""
        if vtype == T_STRING:
            self.string()
        elif vtype == T_ARRAY:
            etype, count = self.take("<IQ")
            if etype in TYPE_SIZES:
                self.pos += TYPE_SIZES[etype] * count
            else:
                for _ in range(count):
                    self.skip_value(etype)
        else:
            self.pos += TYPE_SIZES[vtype]


def parse_gguf(data):
    """(kv_bytes, alignment, tensors, data_start) of a GGUF v3 image: kv_bytes is every
    key-value pair's encoding, in order; tensors are (name, dims, type, offset)."""
    r = Reader(data)
    magic, version, n_tensors, n_kv = r.take("<4sIQQ")
    assert magic == b"GGUF" and version == 3
    kv_bytes, alignment = [], 32
    for _ in range(n_kv):
        start = r.pos
        key = r.string()
        vtype = r.take("<I")
        vstart = r.pos
        r.skip_value(vtype)
        if key == b"general.alignment" and vtype == T_UINT32:
            alignment = struct.unpack_from("<I", data, vstart)[0]
        kv_bytes.append(data[start:r.pos])
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.take("<I")
        dims = [r.take("<Q") for _ in range(n_dims)]
        ttype, offset = r.take("<IQ")
        tensors.append((name, dims, ttype, offset))
    data_start = r.pos + (-r.pos % alignment)
    return kv_bytes, alignment, tensors, data_start


def gguf_str(b):
    """A GGUF string's encoding."""
    if isinstance(b, str):
        b = b.encode()
    return struct.pack("<Q", len(b)) + b


def split_gguf(src, directory, stem, count):
    """Cuts src into count shards directory/STEM-0000K-of-0000N.gguf as llama.cpp's
    gguf-split does: the metadata in the first, split.no/count/tensors.count in every
    one, tensors dealt out in order. Returns the shard paths."""
    data = gm.read_file(src)
    kv_bytes, alignment, tensors, data_start = parse_gguf(data)
    ends = sorted(t[3] for t in tensors)[1:] + [len(data) - data_start]
    extent = {t[3]: e for t, e in zip(sorted(tensors, key=lambda t: t[3]), ends)}
    paths = []
    first = 0
    for s in range(count):
        last = len(tensors) * (s + 1) // count
        part = tensors[first:last]
        kvs = (kv_bytes if s == 0 else []) + [
            gguf_str("split.no") + struct.pack("<IH", T_UINT16, s),
            gguf_str("split.count") + struct.pack("<IH", T_UINT16, count),
            gguf_str("split.tensors.count") + struct.pack("<Ii", T_INT32, len(tensors))]
        out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(part), len(kvs)) + b"".join(kvs))
        blobs, off = [], 0
        for name, dims, ttype, offset in part:
            blob = data[data_start + offset:data_start + extent[offset]]
            out += gguf_str(name) + struct.pack("<I", len(dims))
            out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ttype, off)
            blobs.append(blob)
            off += len(blob) + (-len(blob) % alignment)
        out += b"\0" * (-len(out) % alignment)
        for blob in blobs:
            out += blob + b"\0" * (-len(blob) % alignment)
        path = os.path.join(directory, "%s-%05d-of-%05d.gguf" % (stem, s + 1, count))
        with open(path, "wb") as f:
            f.write(out)
        paths.append(path)
        first = last
    return paths


def write_big_vocab(path, n_tokens=151936, n_merges=151387, seed=7):
    """A GGUF whose header holds a Qwen-sized BPE vocabulary (tokens, token types and
    merges of realistic lengths: about 5.5 MB) and one small f32 tensor. Returns the
    header's size (the data section's start)."""
    import random
    rnd = random.Random(seed)
    letters = b"abcdefghijklmnopqrstuvwxyz\xc4\xa0"

    def word(lo, hi):
        return bytes(rnd.choice(letters) for _ in range(rnd.randint(lo, hi)))

    kvs = [gguf_str("general.architecture") + struct.pack("<I", T_STRING) + gguf_str("gpt2"),
           gguf_str("general.name") + struct.pack("<I", T_STRING) + gguf_str("big-vocab"),
           gguf_str("tokenizer.ggml.model") + struct.pack("<I", T_STRING) + gguf_str("gpt2")]
    toks = b"".join(gguf_str(b"t%d" % i + word(0, 8)) for i in range(n_tokens))
    kvs.append(gguf_str("tokenizer.ggml.tokens") + struct.pack("<IIQ", T_ARRAY, T_STRING, n_tokens) + toks)
    kvs.append(gguf_str("tokenizer.ggml.token_type") + struct.pack("<IIQ", T_ARRAY, T_INT32, n_tokens)
               + struct.pack("<%di" % n_tokens, *([1] * n_tokens)))
    merges = b"".join(gguf_str(word(2, 7) + b" " + word(2, 8)) for _ in range(n_merges))
    kvs.append(gguf_str("tokenizer.ggml.merges") + struct.pack("<IIQ", T_ARRAY, T_STRING, n_merges) + merges)
    tensor = struct.pack("<32f", *range(32))
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, 1, len(kvs)) + b"".join(kvs))
    out += gguf_str("token_embd.weight") + struct.pack("<IQQIQ", 2, 8, 4, 0, 0)
    out += b"\0" * (-len(out) % 32)
    header = len(out)
    out += tensor
    with open(path, "wb") as f:
        f.write(out)
    return header


def tensor_extents(path):
    """{tensor name: (absolute start, next tensor's start or the file's end)}."""
    data = gm.read_file(path)
    _, _, tensors, data_start = parse_gguf(data)
    starts = sorted(data_start + t[3] for t in tensors)
    nxt = {s: e for s, e in zip(starts, starts[1:] + [len(data)])}
    return {t[0].decode(): (data_start + t[3], nxt[data_start + t[3]]) for t in tensors}


# ---- requests in the logs ----


def check_raw_files(tc, m, data, extents):
    """Reads every tensor's raw file of mount m and checks its bytes against data (the
    model file's bytes), extents as tensor_extents gives them."""
    for name, (a, _) in sorted(extents.items()):
        got = gm.read_file(m.p("tensors", name))
        tc.assertGreater(len(got), 0)
        tc.assertTrue(got == data[a:a + len(got)], "bytes of %s" % name)

def range_length(header, size=None):
    """Bytes asked for by a single-range Range header 'bytes=a-b' (or 'a-' with size)."""
    m = re.fullmatch(r"bytes=(\d+)-(\d*)", header or "")
    if not m:
        raise AssertionError("not a single byte range: %r" % header)
    a, b = int(m.group(1)), m.group(2)
    return (int(b) + 1 if b else size) - a


# ---- reads that cannot hang the test ----

READER = r"""
import sys
sys.path.insert(0, sys.argv[5])
import ggufs_mount as gm
try:
    sys.stdout.buffer.write(gm.pread_direct(sys.argv[1], int(sys.argv[3]), int(sys.argv[2]),
                                            sys.argv[4] == "direct"))
except OSError as e:
    sys.exit(100 + e.errno)
"""


def read_bounded(path, offset, length, timeout, direct=True):
    """Reads length bytes at offset in a child process: (errno or 0, bytes, seconds).
    The child is killed (and the test fails) if the read takes longer than timeout.
    direct: O_DIRECT, so the daemon sees the read and not the page cache."""
    start = time.monotonic()
    try:
        r = subprocess.run([sys.executable, "-c", READER, path, str(offset), str(length),
                            "direct" if direct else "cached",
                            os.path.dirname(os.path.abspath(gm.__file__))],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError("a read of %s did not end within %g s" % (path, timeout))
    elapsed = time.monotonic() - start
    if r.returncode == 0:
        return 0, r.stdout, elapsed
    if r.returncode > 100:
        return r.returncode - 100, b"", elapsed
    raise AssertionError("reader failed: %d %r" % (r.returncode, r.stderr))



def public_root():
    """A temporary directory for a server's files, removed by the caller."""
    d = tempfile.mkdtemp(prefix="ggufs-srv-")
    os.chmod(d, 0o755)
    return d


def install(src, root, rel):
    """Copies src to root/rel (making directories), keeping its mtime; returns the path."""
    import shutil
    dst = os.path.join(root, rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy2(src, dst)
    return dst


def write_noise_model(path, shapes, seed):
    """A GGUF at path of F32 tensors (name, shape) of standard normal values drawn from
    seed, one tensor after another: a model as large as a test of caching or read-ahead
    needs, whose every block differs. Returns each tensor's bytes."""
    rng = numpy.random.default_rng(seed)
    data = [rng.standard_normal(int(numpy.prod(shape)), dtype=numpy.float32).tobytes()
            for _, shape in shapes]
    gm.write_gguf(path, [("general.architecture", "test")],
                  [(name, list(shape), gm.GGML_F32, d) for (name, shape), d in zip(shapes, data)])
    return data


def served_root():
    """A public_root holding TINY where the remote tests ask for it: models/tinyllama-q4km.gguf,
    the hub's owner/repo/resolve/main/tinyllama-q4km.gguf, and split/tiny-0000N-of-00003.gguf.
    Returns (root, the first copy's path, the shards' paths)."""
    root = public_root()
    tiny = install(TINY, root, "models/tinyllama-q4km.gguf")
    install(TINY, root, "owner/repo/resolve/main/tinyllama-q4km.gguf")
    os.makedirs(os.path.join(root, "split"))
    return root, tiny, split_gguf(TINY, os.path.join(root, "split"), "tiny", 3)


def read_sequentially(path, piece=128 * 1024):
    """The file read by one reader with O_DIRECT, piece after piece (so no kernel
    read-ahead): any request in flight beside the one it waits for is the daemon's."""
    out = bytearray()
    while True:
        b = gm.pread_direct(path, piece, len(out))
        out += b
        if len(b) < piece:
            return bytes(out)
