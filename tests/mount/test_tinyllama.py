#!/usr/bin/env python3
"""End to end: mount the bundled llama.cpp model and check every file against
tinyllama-q4km.expected.json (written by an independent reader of the file)."""
import errno
import hashlib
import json
import math
import mmap
import os
import random
import stat
import subprocess
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

import numpy

import ggufs_mount as gm

with open(gm.TINY_EXPECTED) as f:
    EXPECTED = json.load(f)


def tensor_files(t):
    name = gm.escape_name(t["name"].encode(), tensor=True)
    return name, name + ".f32", name + ".npy"


class Tree(gm.MountedTestCase):
    MODEL = gm.TINY

    def test_root_listing(self):
        self.assertEqual(sorted(os.listdir(self.p())),
                         ["gguf.json", "metadata", "model.gguf", "quants", "stats", "stats.tsv",
                          "summary.txt", "tensors"])

    def test_metadata_listing_in_file_order(self):
        want = [gm.escape_name(k.encode(), tensor=False) for k in EXPECTED["metadata"]]
        self.assertEqual(sorted(os.listdir(self.p("metadata"))), sorted(want))
        # readdir keeps file order (directory streams are not sorted by ggufs)
        with os.scandir(self.p("metadata")) as it:
            self.assertEqual([e.name for e in it], want)

    def test_tensors_listing(self):
        want = []
        for t in EXPECTED["tensors"]:
            want += tensor_files(t)
        self.assertEqual(sorted(os.listdir(self.p("tensors"))), sorted(want))

    def test_modes_owner_times(self):
        gs = os.stat(gm.TINY)
        rbits = gs.st_mode & 0o444
        seen = set()
        for root, dirs, files in os.walk(self.p()):
            for d in dirs:
                st = os.stat(os.path.join(root, d))
                self.assertTrue(stat.S_ISDIR(st.st_mode))
                self.assertEqual(stat.S_IMODE(st.st_mode), 0o555 & (rbits | rbits >> 2))
            for f in files:
                st = os.stat(os.path.join(root, f))
                self.assertTrue(stat.S_ISREG(st.st_mode), f)
                self.assertEqual(stat.S_IMODE(st.st_mode), rbits, f)
                self.assertEqual(st.st_nlink, 1)
            for name in dirs + files + ["."]:
                st = os.stat(os.path.join(root, name))
                self.assertEqual((st.st_uid, st.st_gid), (gs.st_uid, gs.st_gid))
                self.assertEqual(st.st_mtime_ns, gs.st_mtime_ns)
                if name != ".":
                    self.assertNotIn(st.st_ino, seen, "inode numbers are unique")
                    seen.add(st.st_ino)

    def test_ls_l(self):
        """ls -l shows r--r--r-- files, r-xr-xr-x directories and exact sizes."""
        for d in ["", "metadata", "tensors"]:
            out = subprocess.run(["ls", "-ln", "--time-style=+", self.p(d)], check=True,
                                 stdout=subprocess.PIPE, text=True).stdout
            lines = [l for l in out.splitlines() if not l.startswith("total")]
            self.assertTrue(lines)
            for line in lines:
                fields = line.split(None, 5)
                mode, size, name = fields[0], int(fields[4]), fields[5]
                path = os.path.join(self.p(d), name)
                if os.path.isdir(path):
                    self.assertEqual(mode, "dr-xr-xr-x", line)
                else:
                    self.assertEqual(mode, "-r--r--r--", line)
                    self.assertEqual(size, os.path.getsize(path), line)

    def test_lookup_missing(self):
        for p in ["nope", "metadata/nope", "tensors/output.weight.f64", "metadata/general.name/x"]:
            with self.assertRaises(OSError) as cm:
                os.stat(self.p(p))
            self.assertIn(cm.exception.errno, (errno.ENOENT, errno.ENOTDIR), p)

    def test_quiet(self):
        """A model without oddities mounts without a word on stderr."""
        self.assertEqual(self.mount.stderr(), "")

    def test_statfs(self):
        sv = os.statvfs(self.p())
        self.assertTrue(sv.f_flag & os.ST_RDONLY)


class Metadata(gm.MountedTestCase):
    MODEL = gm.TINY

    def check_key(self, key, want):
        path = self.p("metadata", gm.escape_name(key.encode(), tensor=False))
        content = gm.read_file(path)
        self.assertEqual(os.stat(path).st_size, len(content), key)
        vtype = want["type"]
        if not vtype.startswith("array["):
            self.assertEqual(content, gm.render_scalar(vtype, want["value"]) + b"\n", key)
            return
        etype = vtype[len("array["):-1]
        count = want["count"]
        if count == 0:
            self.assertEqual(content, b"", key)
            return
        self.assertTrue(content.endswith(b"\n"), key)
        lines = content[:-1].split(b"\n")
        self.assertEqual(len(lines), count, key)
        first = [gm.render_scalar(etype, v, in_array=True) for v in want["first"]]
        self.assertEqual(lines[:len(first)], first, key)
        self.assertEqual(lines[-1], gm.render_scalar(etype, want["last"], in_array=True), key)

    def test_every_key(self):
        for key, want in EXPECTED["metadata"].items():
            with self.subTest(key=key):
                self.check_key(key, want)

    def test_known_renderings(self):
        """A few values spelled out, so the renderer and this test cannot agree on a
        wrong rule."""
        self.assertEqual(gm.read_file(self.p("metadata", "general.architecture")), b"llama\n")
        self.assertEqual(gm.read_file(self.p("metadata", "llama.attention.layer_norm_rms_epsilon")),
                         b"1e-05\n")
        self.assertEqual(gm.read_file(self.p("metadata", "tokenizer.ggml.add_bos_token")), b"true\n")
        self.assertEqual(gm.read_file(self.p("metadata", "llama.context_length")), b"2048\n")
        tpl = gm.read_file(self.p("metadata", "tokenizer.chat_template"))
        self.assertEqual(tpl, EXPECTED["metadata"]["tokenizer.chat_template"]["value"].encode() + b"\n")
        self.assertIn(b"\n", tpl[:-1], "a string's own newlines are kept as they are")

    def test_random_ranges_of_rendered_files(self):
        """Rendered files read in arbitrary pieces give the same bytes as a whole read."""
        rng = random.Random(7)
        for key in ["tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.chat_template"]:
            path = self.p("metadata", key)
            whole = gm.read_file(path)
            for _ in range(40):
                off = rng.randrange(0, len(whole) + 10)
                n = rng.choice([1, 2, 7, 100, 4095, 4097, 70000])
                self.assertEqual(gm.pread_direct(path, n, off), whole[off:off + n], (key, off, n))

    def test_cat_and_hexdump(self):
        path = self.p("metadata", "general.name")
        out = subprocess.run(["cat", path], check=True, stdout=subprocess.PIPE).stdout
        self.assertEqual(out, b"tinyllama-test\n")
        got = subprocess.run(["hexdump", "-C", path], check=True, stdout=subprocess.PIPE).stdout
        want = subprocess.run(["hexdump", "-C"], input=b"tinyllama-test\n", check=True,
                              stdout=subprocess.PIPE).stdout
        self.assertEqual(got, want)


class Tensors(gm.MountedTestCase):
    MODEL = gm.TINY

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with open(gm.TINY, "rb") as f:
            cls.model_bytes = f.read()

    def test_raw(self):
        for t in EXPECTED["tensors"]:
            with self.subTest(tensor=t["name"]):
                path = self.p("tensors", tensor_files(t)[0])
                self.assertEqual(os.stat(path).st_size, t["nbytes"])
                data = gm.read_file(path)
                self.assertEqual(len(data), t["nbytes"])
                self.assertEqual(hashlib.sha256(data).hexdigest(), t["raw_sha256"])
                off = t["file_offset"]
                self.assertEqual(data, self.model_bytes[off:off + t["nbytes"]])

    def test_f32_values(self):
        for t in EXPECTED["tensors"]:
            with self.subTest(tensor=t["name"]):
                path = self.p("tensors", tensor_files(t)[1])
                n = math.prod(t["dims"])
                self.assertEqual(os.stat(path).st_size, 4 * n)
                a = numpy.fromfile(path, dtype=numpy.float32).reshape(t["numpy_shape"])
                flat = a.ravel().astype(numpy.float64)
                # sums: float32 data summed in another order; scale by the absolute sum
                tol = 1e-5 * max(t["f32_abs_sum"], 1e-30)
                self.assertLessEqual(abs(flat.sum() - t["f32_sum"]), tol)
                self.assertLessEqual(abs(numpy.abs(flat).sum() - t["f32_abs_sum"]), tol)
                self.assertEqual(flat.min(), t["f32_min"])
                self.assertEqual(flat.max(), t["f32_max"])
                self.assertEqual(flat[:16].tolist(), t["f32_first16"])
                self.assertEqual(flat[-4:].tolist(), t["f32_last4"])

    def test_f32_random_unaligned_preads(self):
        rng = random.Random(1)
        for t in EXPECTED["tensors"]:
            with self.subTest(tensor=t["name"]):
                path = self.p("tensors", tensor_files(t)[1])
                whole = gm.read_file(path)
                for _ in range(20):
                    off = rng.randrange(0, len(whole))
                    n = rng.choice([1, 3, 5, 131, 1023, 4097, 65537, 300001])
                    self.assertEqual(gm.pread_direct(path, n, off), whole[off:off + n],
                                     (off, n))
                # the tail, and past the end
                self.assertEqual(gm.pread_direct(path, 100, len(whole) - 3), whole[-3:])
                self.assertEqual(gm.pread_direct(path, 100, len(whole) + 5), b"")

    def test_raw_random_preads(self):
        rng = random.Random(2)
        for t in EXPECTED["tensors"][:6]:
            path = self.p("tensors", tensor_files(t)[0])
            whole = gm.read_file(path)
            for _ in range(20):
                off = rng.randrange(0, len(whole))
                n = rng.choice([1, 7, 4099, 100003])
                self.assertEqual(gm.pread_direct(path, n, off), whole[off:off + n])

    def test_mmap(self):
        t = EXPECTED["tensors"][0]
        for name in tensor_files(t)[:2]:
            path = self.p("tensors", name)
            whole = gm.read_file(path)
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                self.assertEqual(m[:], whole)
                self.assertEqual(m[12345:23456], whole[12345:23456])

    def test_numpy_memmap(self):
        t = EXPECTED["tensors"][0]
        path = self.p("tensors", tensor_files(t)[1])
        a = numpy.memmap(path, dtype=numpy.float32, mode="r").reshape(t["numpy_shape"])
        self.assertEqual(a.ravel()[:16].astype(numpy.float64).tolist(), t["f32_first16"])

    def test_parallel_reads(self):
        """The multithreaded loop serves concurrent readers the same bytes."""
        paths = [self.p("tensors", n) for t in EXPECTED["tensors"] for n in tensor_files(t)[:2]]
        want = {p: hashlib.sha256(gm.read_file(p)).hexdigest() for p in paths}

        def digest(p):
            h = hashlib.sha256()
            fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
            try:
                off = 0
                while True:
                    b = os.pread(fd, 50000, off)
                    if not b:
                        break
                    h.update(b)
                    off += len(b)
            finally:
                os.close(fd)
            return p, h.hexdigest()

        with ThreadPoolExecutor(8) as ex:
            for p, d in ex.map(digest, paths * 3):
                self.assertEqual(d, want[p], p)

    def test_cat_hexdump_dd(self):
        t = EXPECTED["tensors"][1]
        raw, f32 = (self.p("tensors", n) for n in tensor_files(t)[:2])
        out = subprocess.run(["cat", f32], check=True, stdout=subprocess.PIPE).stdout
        self.assertEqual(out, gm.read_file(f32))
        got = subprocess.run(["hexdump", "-C", raw], check=True, stdout=subprocess.PIPE).stdout
        want = subprocess.run(["hexdump", "-C"], input=gm.read_file(raw), check=True,
                              stdout=subprocess.PIPE).stdout
        self.assertEqual(got, want)
        big = self.p("tensors", tensor_files(EXPECTED["tensors"][0])[1])
        out = subprocess.run(["dd", "if=" + big, "bs=4M", "status=none"], check=True,
                             stdout=subprocess.PIPE).stdout
        self.assertEqual(out, gm.read_file(big))


class Npy(gm.MountedTestCase):
    MODEL = gm.TINY

    def test_load(self):
        for t in EXPECTED["tensors"]:
            with self.subTest(tensor=t["name"]):
                _, f32, npy = (self.p("tensors", n) for n in tensor_files(t))
                a = numpy.load(npy)
                self.assertEqual(a.dtype, numpy.dtype("<f4"))
                self.assertEqual(list(a.shape), t["numpy_shape"])
                self.assertTrue(a.flags["C_CONTIGUOUS"])
                raw = numpy.fromfile(f32, dtype=numpy.float32).reshape(t["numpy_shape"])
                self.assertTrue(numpy.array_equal(a, raw, equal_nan=True))
                data = gm.read_file(npy)
                self.assertEqual(len(data), os.stat(npy).st_size)
                self.assertEqual(data[:8], b"\x93NUMPY\x01\x00")
                self.assertEqual(data[-os.stat(f32).st_size:], gm.read_file(f32))

    def test_load_mmap(self):
        t = EXPECTED["tensors"][0]
        npy = self.p("tensors", tensor_files(t)[2])
        m = numpy.load(npy, mmap_mode="r")
        self.assertEqual(list(m.shape), t["numpy_shape"])
        self.assertEqual(m.ravel()[-4:].astype(numpy.float64).tolist(), t["f32_last4"])

    def test_random_preads(self):
        rng = random.Random(5)
        for t in EXPECTED["tensors"][:4]:
            npy = self.p("tensors", tensor_files(t)[2])
            whole = gm.read_file(npy)
            for _ in range(20):
                off = rng.randrange(0, min(len(whole), 300))  # across the header's end
                n = rng.choice([1, 50, 129, 4097])
                self.assertEqual(gm.pread_direct(npy, n, off), whole[off:off + n])


class Json(gm.MountedTestCase):
    MODEL = gm.TINY

    def test_document(self):
        text = gm.read_file(self.p("gguf.json"))
        self.assertEqual(len(text), os.stat(self.p("gguf.json")).st_size)

        def no_constants(c):
            raise ValueError("not JSON: " + c)
        doc = json.loads(text.decode("utf-8"), parse_constant=no_constants)
        self.assertEqual(doc["file"], os.path.basename(gm.TINY))
        self.assertEqual(doc["version"], 3)
        self.assertEqual(list(doc["metadata"]), list(EXPECTED["metadata"]))
        for key, want in EXPECTED["metadata"].items():
            with self.subTest(key=key):
                got = doc["metadata"][key]
                self.assertEqual(got["type"], want["type"])
                if want["type"].startswith("array["):
                    self.assertEqual(len(got["value"]), want["count"])
                    if want["type"] == "array[float32]":
                        f = lambda v: numpy.float32(v)
                        self.assertEqual([f(v) for v in got["value"][:8]], [f(v) for v in want["first"]])
                        self.assertEqual(f(got["value"][-1]), f(want["last"]))
                    else:
                        self.assertEqual(got["value"][:8], want["first"])
                        self.assertEqual(got["value"][-1], want["last"])
                elif want["type"] == "float32":
                    self.assertEqual(numpy.float32(got["value"]), numpy.float32(want["value"]))
                else:
                    self.assertEqual(got["value"], want["value"])
        self.assertEqual(len(doc["tensors"]), len(EXPECTED["tensors"]))
        for got, want in zip(doc["tensors"], EXPECTED["tensors"]):
            self.assertEqual(got["name"], want["name"])
            self.assertEqual(got["type"].lower(), want["type"].lower())
            self.assertEqual(got["dims"], want["dims"])
            self.assertEqual(got["offset"], want["file_offset"])
            self.assertEqual(got["size"], want["nbytes"])

    def test_jq(self):
        import shutil
        if not shutil.which("jq"):
            self.skipTest("jq is not installed")
        out = subprocess.run(["jq", "-r", ".metadata[\"general.name\"].value", self.p("gguf.json")],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
        self.assertEqual(out, "tinyllama-test\n")


class Summary(gm.MountedTestCase):
    MODEL = gm.TINY

    def test_summary(self):
        text = gm.read_file(self.p("summary.txt")).decode()
        self.assertEqual(len(text.encode()), os.stat(self.p("summary.txt")).st_size)
        self.assertTrue(text.endswith("\n"))
        self.assertIn("llama", text)
        self.assertIn("tinyllama-test", text)
        counts = {}
        for t in EXPECTED["tensors"]:
            counts[t["type"].lower()] = counts.get(t["type"].lower(), 0) + 1
        lines = [l.split() for l in text.splitlines()]
        for gtype, n in counts.items():
            rows = [l for l in lines if l and l[0].lower() == gtype]
            self.assertEqual(len(rows), 1, gtype)
            self.assertIn(str(n), rows[0], gtype)


class Xattrs(gm.MountedTestCase):
    MODEL = gm.TINY

    def test_metadata(self):
        for key, want in EXPECTED["metadata"].items():
            with self.subTest(key=key):
                path = self.p("metadata", gm.escape_name(key.encode(), tensor=False))
                self.assertEqual(os.getxattr(path, "user.gguf.type").decode(), want["type"])
                names = set(os.listxattr(path))
                if want["type"].startswith("array["):
                    self.assertEqual(names, {"user.gguf.type", "user.gguf.count"})
                    self.assertEqual(os.getxattr(path, "user.gguf.count"), str(want["count"]).encode())
                else:
                    self.assertEqual(names, {"user.gguf.type"})

    def test_tensors(self):
        for t in EXPECTED["tensors"]:
            for name in tensor_files(t):
                with self.subTest(file=name):
                    path = self.p("tensors", name)
                    self.assertEqual(os.getxattr(path, "user.gguf.name"), t["name"].encode())
                    self.assertEqual(os.getxattr(path, "user.gguf.type").decode().lower(),
                                     t["type"].lower())
                    self.assertEqual(os.getxattr(path, "user.gguf.dims").decode(),
                                     ",".join(map(str, t["dims"])))
                    self.assertEqual(int(os.getxattr(path, "user.gguf.offset")), t["file_offset"])

    def test_size_queries_and_errors(self):
        path = self.p("tensors", tensor_files(EXPECTED["tensors"][0])[0])
        names = b"".join(n.encode() + b"\0" for n in os.listxattr(path))
        self.assertEqual(gm.xattr_size(path), len(names))
        value = os.getxattr(path, "user.gguf.name")
        self.assertEqual(gm.xattr_size(path, "user.gguf.name"), len(value))
        self.assertEqual(gm.xattr_small(path, "user.gguf.name", len(value)), len(value))
        self.assertEqual(gm.xattr_small(path, "user.gguf.name", 3), -errno.ERANGE)
        self.assertEqual(gm.xattr_size(path, "user.nope"), -errno.ENODATA)
        self.assertEqual(gm.xattr_size(self.p("gguf.json"), "user.gguf.type"), -errno.ENODATA)


class ReadOnly(gm.MountedTestCase):
    MODEL = gm.TINY

    def assertErofs(self, fn, *args):
        with self.assertRaises(OSError) as cm:
            fn(*args)
        self.assertEqual(cm.exception.errno, errno.EROFS, (fn.__name__, args))

    def test_every_change_is_erofs(self):
        f = self.p("metadata", "general.name")
        t = self.p("tensors", tensor_files(EXPECTED["tensors"][0])[1])
        self.assertErofs(os.open, f, os.O_WRONLY)
        self.assertErofs(os.open, t, os.O_RDWR)
        self.assertErofs(os.open, f, os.O_RDONLY | os.O_TRUNC)
        self.assertErofs(os.open, self.p("new"), os.O_WRONLY | os.O_CREAT, 0o644)
        self.assertErofs(os.open, self.p("metadata", "new"), os.O_RDONLY | os.O_CREAT, 0o644)
        self.assertErofs(os.mkdir, self.p("d"))
        self.assertErofs(os.mknod, self.p("tensors", "fifo"), 0o644 | stat.S_IFIFO)
        self.assertErofs(os.unlink, f)
        self.assertErofs(os.rmdir, self.p("metadata"))
        self.assertErofs(os.rename, f, self.p("metadata", "x"))
        self.assertErofs(os.symlink, "x", self.p("link"))
        self.assertErofs(os.link, f, self.p("hard"))
        self.assertErofs(os.chmod, f, 0o644)
        self.assertErofs(os.chown, f, 1, 1)
        self.assertErofs(os.truncate, f, 0)
        self.assertErofs(os.utime, f, (0, 0))
        self.assertErofs(os.setxattr, f, "user.x", b"1")
        self.assertErofs(os.removexattr, f, "user.x")
        self.assertEqual(gm.read_file(f), b"tinyllama-test\n")

    def test_shell_write(self):
        r = subprocess.run(["sh", "-c", "echo x > '%s'" % self.p("metadata", "general.name")],
                           stderr=subprocess.PIPE, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Read-only file system", r.stderr)


if __name__ == "__main__":
    gm.main()
