#!/usr/bin/env python3
"""model.gguf at the root of a local mount (issue 18):
- a single-file model's model.gguf is the file (sha256), with its size and times in
  stat, for the bundled model and the type vectors, and parses back with ggufs itself
  into the tree's keys, values and tensors, each tensor's bytes its raw file's; its
  pages stay in the page cache across opens (a second read reaches no daemon);
- a split model's is the merged file: the bundled model split in 3 and mounted from its
  second shard merges back into the original byte for byte (it was written in order at
  alignment 32, as llama-gguf-split --merge writes); the type vectors split in 4 parse
  back; gguf.json and summary.txt name it;
- shards that disagree on the alignment are refused at mount with one line;
- an mmap reader and a pread reader of model.gguf at once, while another thread reads
  .f32 files, all get the right bytes;
- the model file cut short under the mount: reads of model.gguf past the cut give EIO
  (not SIGBUS in the daemon), logged with the cause, reads before it the right bytes."""
import errno
import mmap
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import unittest

import ggufs_mount as gm
from modelfile_check import parses_back

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "remote"))
from remote_common import split_gguf  # noqa: E402

ALLTYPES = os.path.join(gm.VECTORS, "alltypes.gguf")


class Single(unittest.TestCase):
    def test_tinyllama(self):
        with gm.Mount(gm.TINY) as m:
            self.assertEqual(gm.sha256_file(m.p("model.gguf")), gm.sha256_file(gm.TINY))
            st, gs = os.stat(m.p("model.gguf")), os.stat(gm.TINY)
            self.assertEqual(st.st_size, gs.st_size)
            self.assertEqual(st.st_mode & 0o777, 0o444 & gs.st_mode)
            for t in ("st_mtime_ns", "st_ctime_ns", "st_uid", "st_gid"):
                self.assertEqual(getattr(st, t), getattr(gs, t), t)
            self.assertIn("model file:       model.gguf (this file as it is)\n",
                          gm.read_file(m.p("summary.txt")).decode())
            _, err = parses_back(self, m.path)
            self.assertEqual(err, "")
            self.assertEqual(m.stderr(), "")

    def test_page_cache_kept(self):
        """model.gguf is page-cacheable and its pages are kept across opens: a second
        whole read, through a new open, reaches the daemon with no read at all."""
        with gm.Mount(gm.TINY) as m:
            reads = lambda: int(os.getxattr(m.path, "user.ggufs.reads"))
            first = gm.read_file(m.p("model.gguf"))
            after_first = reads()
            self.assertEqual(gm.read_file(m.p("model.gguf")), first)
            self.assertEqual(reads(), after_first)

    def test_alltypes(self):
        with gm.Mount(ALLTYPES) as m:
            self.assertEqual(gm.read_file(m.p("model.gguf")), gm.read_file(ALLTYPES))
            parses_back(self, m.path)


class Split(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ggufs-modelfile-")
        cls.tiny = split_gguf(gm.TINY, cls.dir, "tiny", 3)
        cls.alltypes = split_gguf(ALLTYPES, cls.dir, "alltypes", 4)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def test_tinyllama_merges_back(self):
        with gm.Mount(self.tiny[1]) as m:
            self.assertEqual(os.path.getsize(m.p("model.gguf")), os.path.getsize(gm.TINY))
            self.assertEqual(gm.sha256_file(m.p("model.gguf")), gm.sha256_file(gm.TINY))
            self.assertEqual(int(os.stat(m.p("model.gguf")).st_mtime),
                             int(os.stat(self.tiny[1]).st_mtime))
            self.assertIn("model file:       model.gguf (the 3 shards merged into one GGUF)\n",
                          gm.read_file(m.p("summary.txt")).decode())
            doc, _ = parses_back(self, m.path)
            self.assertNotIn("split.count", doc["metadata"])

    def test_alltypes(self):
        with gm.Mount(self.alltypes[0]) as m:
            doc, _ = parses_back(self, m.path)
            self.assertEqual(os.path.getsize(m.p("model.gguf")),
                             doc["data_offset"] + sum(-(-t["size"] // 32) * 32
                                                      for t in doc["tensors"]))

    def test_many_small_tensors(self):
        """A read that spans more tensors than one reply's pieces (600 tensors of 32
        bytes and their padding in 1 MiB) is served through a copy, as right."""
        src = os.path.join(self.dir, "small.gguf")
        gm.write_gguf(src, [("general.architecture", "test")],
                      [("t%d" % i, [8], gm.GGML_F32, bytes([i % 251]) * 32) for i in range(600)],
                      alignment=64)
        shards = split_gguf(src, self.dir, "small", 2)
        with gm.Mount(shards[0]) as m:
            self.assertEqual(gm.pread_direct(m.p("model.gguf"), 1 << 20, 0),
                             gm.read_file(m.p("model.gguf")))
            parses_back(self, m.path)

    def test_disagreeing_alignment_refused(self):
        d = tempfile.mkdtemp(prefix="ggufs-modelfile-", dir=self.dir)
        mnt = os.path.join(d, "mnt")
        os.mkdir(mnt)
        split = [("split.no", 0), ("split.count", 2), ("split.tensors.count", 2)]
        a = os.path.join(d, "m-00001-of-00002.gguf")
        b = os.path.join(d, "m-00002-of-00002.gguf")
        gm.write_gguf(a, [("general.alignment", 64)] + split,
                      [("a", [8], gm.GGML_F32, bytes(32))], alignment=64)
        split[0] = ("split.no", 1)
        gm.write_gguf(b, split, [("b", [8], gm.GGML_F32, bytes(32))])
        r = gm.run_ggufs([a, mnt])
        err = r.stderr.decode()
        self.assertEqual(r.returncode, 1, err)
        self.assertEqual(err, "ggufs: %s: alignment 32, but the first shard's is 64: the shards "
                              "do not merge into one model.gguf\n" % b)
        self.assertFalse(gm.is_mounted(mnt))


class Readers(unittest.TestCase):
    def test_mmap_pread_and_f32_at_once(self):
        data = gm.read_file(gm.TINY)
        with gm.Mount(gm.TINY) as m:
            names = sorted(n for n in os.listdir(m.p("tensors")) if n.endswith(".f32"))[:6]
            want = {n: gm.read_file(m.p("tensors", n)) for n in names}
            errors = []
            deadline = time.monotonic() + 3.0

            def mmap_reader():
                with open(m.p("model.gguf"), "rb") as f:
                    mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
                    rng = random.Random(1)
                    for _ in range(2000):
                        off = rng.randrange(len(data))
                        n = rng.randrange(1, 200000)
                        if mm[off:off + n] != data[off:off + n]:
                            errors.append("mmap at %d" % off)
                        if time.monotonic() > deadline:
                            break
                    mm.close()

            def pread_reader():
                fd = os.open(m.p("model.gguf"), os.O_RDONLY | os.O_DIRECT)
                rng = random.Random(2)
                try:
                    for _ in range(2000):
                        off = rng.randrange(len(data)) & ~4095
                        got = os.pread(fd, 1 << 20, off)
                        if got != data[off:off + (1 << 20)]:
                            errors.append("pread at %d" % off)
                        if time.monotonic() > deadline:
                            break
                finally:
                    os.close(fd)

            def f32_reader():
                for _ in range(200):
                    for n in names:
                        fd = os.open(m.p("tensors", n), os.O_RDONLY | os.O_DIRECT)
                        try:
                            got = os.pread(fd, len(want[n]), 0)
                        finally:
                            os.close(fd)
                        if got != want[n]:
                            errors.append(n)
                    if time.monotonic() > deadline:
                        break

            threads = [threading.Thread(target=f) for f in (mmap_reader, pread_reader, f32_reader)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            self.assertFalse(any(t.is_alive() for t in threads))
            self.assertEqual(errors, [])


class Shrunk(unittest.TestCase):
    def test_cut_under_the_mount(self):
        with gm.model_copy("ggufs-modelfile-") as (model, data):
            cut = 2500000
            with gm.Mount(model) as m:
                os.truncate(model, cut)
                p = m.p("model.gguf")
                with self.assertRaises(OSError) as e:
                    gm.pread_direct(p, 65536, cut - 4096)
                self.assertEqual(e.exception.errno, errno.EIO)
                self.assertEqual(gm.pread_direct(p, 65536, 1 << 20),
                                 data[1 << 20:(1 << 20) + 65536])
                self.assertIsNone(m.proc.poll(), "the daemon lives")
                # said once, with its cause, as for every other file
                self.assertIn("EIO to a read of model.gguf (65536 bytes at %d), because %s: the "
                              "file shrank from %d to %d bytes" % (cut - 4096, model, len(data),
                                                                   cut), m.stderr())


if __name__ == "__main__":
    gm.main()
