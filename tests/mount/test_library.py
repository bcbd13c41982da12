"""A folder mounted as a library (issue 26): one directory per model holding exactly
the tree `ggufs FILE` shows, folders kept, other files as themselves, models.tsv and
models.json, broken models as an `error` file, inode numbers unique and stable, nothing
read at mount, idle models released, and the folder followed while mounted."""
import hashlib
import json
import os
import shutil
import struct
import time

import ggufs_mount as gm

KEEP_IDLE = 8  # LIB_KEEP_IDLE in lib/7-library/library.h


def snapshot(root):
    """{relative path: (is_dir, mode, size, sha256 of the bytes, xattrs)} of every entry
    under root, the root's own user.ggufs.* counters left out (they count this mount),
    and a library model directory's compare/ too (a single mount has none; its files
    would compare models: test_compare.py)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        if dirpath == root and "compare" in dirs:
            dirs.remove("compare")
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.stat(p)
            xattrs = {x: os.getxattr(p, x) for x in os.listxattr(p)
                      if not x.startswith("user.ggufs.")}
            digest = None
            if not os.path.isdir(p):
                digest = hashlib.sha256(gm.read_file(p)).hexdigest()
            out[rel] = (os.path.isdir(p), st.st_mode, st.st_size, digest, xattrs)
    return out


def write_split(folder, name, count=3):
    """A model split like gguf-split does it (as test_cli.py's), in folder."""
    for i in range(count):
        tensors = [("blk.%d.w%d" % (i, j), [3], gm.GGML_F32, struct.pack("<3f", i, j, 0.5))
                   for j in range(2)]
        kvs = [("general.architecture", "test")] if i == 0 else []
        kvs += [("split.no", i), ("split.count", count), ("split.tensors.count", 2 * count)]
        gm.write_gguf(os.path.join(folder, "%s-%05d-of-%05d.gguf" % (name, i + 1, count)),
                      kvs, tensors)


def tiny_model(path, arch="tiny", tensors=1):
    """A small valid model of architecture arch."""
    gm.write_gguf(path, [("general.architecture", arch), ("general.name", "n-" + arch)],
                  [("t%d" % k, [4], gm.GGML_F32, struct.pack("<4f", k, 1, 2, 3))
                   for k in range(tensors)])


def xattr_int(path, name):
    return int(os.getxattr(path, name))


class LibraryTest(gm.ScratchCase):
    prefix = "ggufs-lib-"
    folders = {"src": "models"}

    def put(self, rel, data=None, copy=None):
        p = os.path.join(self.src, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if copy:
            shutil.copyfile(copy, p)
        else:
            with open(p, "wb") as f:
                f.write(data)
        return p

    def single_error(self, path):
        """The one line `ggufs FILE` prints for a model that does not parse."""
        mnt = os.path.join(self.tmp, "single")
        os.makedirs(mnt, exist_ok=True)
        r = gm.run_ggufs([path, mnt])
        self.assertEqual(r.returncode, 1, r.stderr)
        return r.stderr.decode()

    def test_layout_matches_single_mounts(self):
        self.put("tiny.gguf", copy=gm.TINY)
        self.put("pub/repo/Tiny-Q4_K_M.gguf", copy=gm.TINY)
        write_split(os.path.join(self.src, "pub", "repo"), "big")
        self.put("README.md", b"# the card\n")
        self.put("pub/repo/imatrix.dat", bytes(range(256)) * 40)
        os.makedirs(os.path.join(self.src, "empty"))
        with gm.Mount(self.src) as m:
            self.assertEqual(sorted(os.listdir(m.path)),
                             ["README.md", "empty", "models.json", "models.tsv", "pub", "tiny"])
            self.assertEqual(sorted(os.listdir(m.p("pub", "repo"))),
                             ["Tiny-Q4_K_M", "big", "imatrix.dat"])
            self.assertEqual(os.listdir(m.p("empty")), [])
            # other files as themselves, byte for byte, read-only
            self.assertEqual(gm.read_file(m.p("README.md")), b"# the card\n")
            self.assertEqual(gm.read_file(m.p("pub", "repo", "imatrix.dat")),
                             bytes(range(256)) * 40)
            self.assertEqual(os.stat(m.p("README.md")).st_size, 11)
            with self.assertRaises(OSError):
                open(m.p("README.md"), "r+b")
            # every model directory is its single mount, file for file
            for rel, given in (("tiny", "tiny.gguf"),
                               ("pub/repo/Tiny-Q4_K_M", "pub/repo/Tiny-Q4_K_M.gguf"),
                               ("pub/repo/big", "pub/repo/big-00002-of-00003.gguf")):
                with self.subTest(model=rel):
                    with gm.Mount(os.path.join(self.src, given)) as single:
                        want = snapshot(single.path)
                    got = snapshot(m.p(rel))
                    self.assertIn("compare", os.listdir(m.p(rel)))
                    self.assertEqual(sorted(got), sorted(want))
                    for k in want:
                        self.assertEqual(got[k], want[k], k)
                    self.assertIn("model.gguf", got)

    def test_broken_models(self):
        good = self.put("good.gguf", copy=gm.TINY)
        with open(gm.TINY, "rb") as f:
            head = f.read(1000)
        broken = self.put("cut.gguf", head)
        write_split(self.src, "gap")
        os.unlink(os.path.join(self.src, "gap-00002-of-00003.gguf"))
        with gm.Mount(self.src) as m:
            self.assertEqual(sorted(os.listdir(m.path)),
                             ["cut", "gap", "good", "models.json", "models.tsv"])
            self.assertEqual(os.listdir(m.p("cut")), ["error"])
            self.assertEqual(gm.read_file(m.p("cut", "error")).decode(), self.single_error(broken))
            gap = gm.read_file(m.p("gap", "error")).decode()
            self.assertEqual(gap, self.single_error(os.path.join(self.src, "gap-00001-of-00003.gguf")))
            self.assertIn("gap-00002-of-00003.gguf", gap)  # the missing shard is named
            self.assertFalse(os.path.exists(m.p("cut", "summary.txt")))
            # a neighbour is not troubled, and the log has the line
            self.assertEqual(gm.read_file(m.p("good", "model.gguf")), gm.read_file(good))
            rows = gm.read_file(m.p("models.tsv")).decode().splitlines()
            self.assertEqual(rows[1].split("\t"), ["cut", "error"] + [""] * 10)
            self.assertIn(broken, m.stderr())

    def test_models_tsv_and_json(self):
        self.put("b/tiny.gguf", copy=gm.TINY)
        write_split(self.src, "a")
        tiny_model(os.path.join(self.src, "c.gguf"), tensors=3)
        with gm.Mount(self.src) as m:
            lines = gm.read_file(m.p("models.tsv")).decode().split("\n")
            self.assertEqual(lines[0].split("\t"), [
                "path", "architecture", "name", "file_type", "parameters", "bytes",
                "bits_per_weight", "context_length", "layers", "kv_bytes_per_token", "shards",
                "sha256"])
            self.assertEqual(lines[-1], "")
            rows = [l.split("\t") for l in lines[1:-1]]
            self.assertEqual([r[0] for r in rows], ["a", "b/tiny", "c"])  # sorted by path
            size_a = sum(os.path.getsize(os.path.join(self.src, "a-%05d-of-00003.gguf" % i))
                         for i in (1, 2, 3))
            self.assertEqual(rows[0], ["a", "test", "", "", "18", str(size_a), "32.00", "", "",
                                       "", "3", ""])
            # tinyllama: figures from its expected.json, bytes from its file
            doc = json.loads(gm.read_file(gm.TINY_EXPECTED))
            params = sum(eval("*".join(map(str, t["dims"]))) for t in doc["tensors"])
            self.assertEqual(rows[1], ["b/tiny", "llama", "tinyllama-test", "Q4_K - Medium",
                                       str(params), str(os.path.getsize(gm.TINY)), "5.34", "2048",
                                       "2", "512", "1", ""])
            self.assertEqual(rows[2][:5], ["c", "tiny", "n-tiny", "", "12"])
            # the same in JSON, numbers as numbers and nothing as null
            js = json.loads(gm.read_file(m.p("models.json")))
            self.assertEqual([j["path"] for j in js], ["a", "b/tiny", "c"])
            self.assertEqual(js[1]["kv_bytes_per_token"], 512)
            self.assertEqual(js[1]["parameters"], params)
            self.assertIsNone(js[0]["context_length"])
            self.assertIsNone(js[0]["sha256"])
            self.assertEqual(js[0]["shards"], 3)
            # the KV figure in summary.txt too
            self.assertIn("512 bytes per token", gm.read_file(m.p("b", "tiny", "summary.txt")).decode())
            self.assertEqual(os.stat(m.p("models.tsv")).st_size, len("\n".join(lines)))
            # mapped, shared and private, as every file can be (issue 38 item 13: they
            # were ENODEV); shared from Linux 6.6 on (FUSE_DIRECT_IO_ALLOW_MMAP)
            import mmap
            kernel = tuple(int(x) for x in os.uname().release.split(".")[:2])
            for name in ("models.tsv", "models.json"):
                data = gm.read_file(m.p(name))
                with open(m.p(name), "rb") as f:
                    for flags in ((mmap.MAP_SHARED,) if kernel >= (6, 6) else ()) + \
                            (mmap.MAP_PRIVATE,):
                        with mmap.mmap(f.fileno(), 0, flags=flags, prot=mmap.PROT_READ) as mm:
                            self.assertEqual(bytes(mm), data, name)

    def test_collisions(self):
        """The man page's rule: folders and other files keep their names; a model whose
        name is taken is named after its file; models.tsv at the root is the library's."""
        self.put("a/x.txt", b"x")
        self.put("a.gguf", copy=gm.TINY)
        write_split(self.src, "s", count=2)
        tiny_model(os.path.join(self.src, "s.gguf"))
        self.put("models.tsv", b"mine\n")
        with gm.Mount(self.src) as m:
            self.assertEqual(sorted(os.listdir(m.path)),
                             ["a", "a.gguf", "models.json", "models.tsv", "s", "s.gguf"])
            self.assertEqual(os.listdir(m.p("a")), ["x.txt"])
            self.assertIn("model.gguf", os.listdir(m.p("a.gguf")))
            # s-00001-of-00002.gguf sorts before s.gguf ('-' < '.'): the split set claims
            # "s" first, and the single file is named after itself
            self.assertEqual(gm.read_file(m.p("s", "metadata", "general.architecture")), b"test\n")
            self.assertEqual(gm.read_file(m.p("s.gguf", "metadata", "general.architecture")),
                             b"tiny\n")
            self.assertTrue(gm.read_file(m.p("models.tsv")).startswith(b"path\t"))

    def test_lazy_unique_and_stable_numbers(self):
        for i in range(KEEP_IDLE + 4):
            self.put("m%02d.gguf" % i, copy=gm.TINY)
        with gm.Mount(self.src) as m:
            # listing and stat of every model directory read no model
            for name in os.listdir(m.path):
                os.stat(m.p(name))
            self.assertEqual(xattr_int(m.path, "user.ggufs.models_opened"), 0)
            first = snapshot(m.p("m00"))
            inos = {}
            for rel in first:
                inos[rel] = os.stat(m.p("m00", rel)).st_ino
            self.assertEqual(xattr_int(m.path, "user.ggufs.models_opened"), 1)
            # every model touched: at most KEEP_IDLE stay built
            seen = {}
            for i in range(KEEP_IDLE + 4):
                d = m.p("m%02d" % i)
                for dirpath, dirs, files in os.walk(d):
                    for n in dirs + files:
                        ino = os.stat(os.path.join(dirpath, n)).st_ino
                        self.assertNotIn(ino, seen, (dirpath, n, seen.get(ino)))
                        seen[ino] = os.path.join(dirpath, n)
                ino = os.stat(d).st_ino
                self.assertNotIn(ino, seen)
                seen[ino] = d
            self.assertLessEqual(xattr_int(m.path, "user.ggufs.models_built"), KEEP_IDLE)
            # m00 was released and is built again with the same numbers and bytes
            self.assertEqual(snapshot(m.p("m00")), first)
            for rel, ino in inos.items():
                self.assertEqual(os.stat(m.p("m00", rel)).st_ino, ino, rel)
            self.assertGreater(xattr_int(m.path, "user.ggufs.models_opened"), KEEP_IDLE + 4)

    def test_follows_the_folder(self):
        tiny_model(os.path.join(self.src, "one.gguf"), "first")
        self.put("keep.txt", b"v1")
        with gm.Mount(self.src) as m:
            self.assertEqual(gm.read_file(m.p("one", "metadata", "general.architecture")), b"first\n")
            old = open(m.p("one", "model.gguf"), "rb")
            try:
                before = old.read()
                old.seek(0)
                # added, replaced (by rename, and in place), removed
                tiny_model(os.path.join(self.tmp, "new"), "second", tensors=2)
                os.rename(os.path.join(self.tmp, "new"), os.path.join(self.src, "one.gguf"))
                self.put("two.gguf", copy=gm.TINY)
                self.put("keep.txt", b"version 2")
                self.assertEqual(sorted(os.listdir(m.path)),
                                 ["keep.txt", "models.json", "models.tsv", "one", "two"])
                self.assertEqual(gm.read_file(m.p("one", "metadata", "general.architecture")),
                                 b"second\n")
                self.assertEqual(gm.read_file(m.p("keep.txt")), b"version 2")
                self.assertEqual(gm.read_file(m.p("two", "metadata", "general.architecture")),
                                 b"llama\n")
                # the open file keeps the version it opened
                self.assertEqual(old.read(), before)
            finally:
                old.close()
            os.unlink(os.path.join(self.src, "two.gguf"))
            self.assertFalse(os.path.exists(m.p("two")))
            self.assertNotIn("two", os.listdir(m.path))
            rows = gm.read_file(m.p("models.tsv")).decode().splitlines()
            self.assertEqual([r.split("\t")[:2] for r in rows[1:]], [["one", "second"]])

    def test_check_a_library(self):
        """--check of a folder checks every model in it, one block each, in the library's
        order; a model that does not parse has its one line, and the status says so."""
        a = self.put("a.gguf", copy=gm.TINY)
        b = self.put("pub/b.gguf", copy=gm.TINY)
        with open(gm.TINY, "rb") as f:
            cut = self.put("cut.gguf", f.read(1000))
        r = gm.run_ggufs(["--check", self.src])
        self.assertEqual(r.returncode, 3)
        blocks = r.stdout.decode().split("\n\n")
        self.assertEqual(len(blocks), 2, blocks)
        self.assertTrue(blocks[0].startswith(os.path.realpath(a) + ": 21 tensors checked"), blocks)
        self.assertTrue(blocks[1].startswith(os.path.realpath(b) + ": 21 tensors checked"), blocks)
        self.assertEqual(r.stderr.decode(), self.single_error(os.path.realpath(cut)))
        r = gm.run_ggufs(["--check", "--json", self.src])
        self.assertEqual(len(json.loads(r.stdout)), 2)

    def test_empty_library(self):
        with gm.Mount(self.src) as m:
            self.assertEqual(sorted(os.listdir(m.path)), ["models.json", "models.tsv"])
            self.assertEqual(gm.read_file(m.p("models.tsv")).count(b"\n"), 1)
            self.assertEqual(json.loads(gm.read_file(m.p("models.json"))), [])

    def test_refusals(self):
        self.put("x.gguf", copy=gm.TINY)
        mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(mnt)
        r = gm.run_ggufs(["-o", "edits=" + os.path.join(self.tmp, "e.json"), self.src, mnt])
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.decode().splitlines()), 1, r.stderr)
        self.assertIn("edits", r.stderr.decode())
        inside = os.path.join(self.src, "mnt")
        os.mkdir(inside)
        r = gm.run_ggufs([self.src, inside])
        self.assertEqual(r.returncode, 1)
        self.assertEqual(len(r.stderr.decode().splitlines()), 1, r.stderr)
        self.assertFalse(gm.is_mounted(mnt) or gm.is_mounted(inside))


if __name__ == "__main__":
    gm.main()
