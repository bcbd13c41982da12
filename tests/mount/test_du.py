#!/usr/bin/env python3
"""What du and copying tools see: du -s of a mount is the model's bytes (model.gguf's
blocks, and one block for each other file, which are views of those bytes or computed
from them), not the computed files' sizes; and tar --sparse, cp --sparse=always and
rsync -S still copy every computed file's bytes (a file of 0 blocks is taken for all
holes by GNU tar)."""
import os
import shutil
import subprocess
import tempfile
import unittest

import ggufs_mount as gm


class Du(gm.MountedTestCase):
    MODEL = gm.TINY

    def files(self):
        for d, _, names in os.walk(self.mount.path):
            for n in names:
                yield os.path.join(d, n)

    def test_du_is_the_model(self):
        model = os.stat(self.p("model.gguf"))
        self.assertEqual(model.st_blocks, (model.st_size + 511) // 512)
        others = [p for p in self.files() if not p.endswith("/model.gguf")]
        for p in others:
            st = os.stat(p)
            self.assertEqual(st.st_blocks, 1 if st.st_size else 0, p)
        du = subprocess.run(["du", "-sB1", self.mount.path], capture_output=True, text=True,
                            check=True).stdout.split()[0]
        self.assertEqual(int(du), model.st_blocks * 512 + 512 * len(others))
        # the apparent size is still every byte a copy would take, about 15 times
        apparent = sum(os.stat(p).st_size for p in self.files())
        self.assertGreater(apparent, 10 * model.st_size)
        self.assertLess(int(du), 1.05 * model.st_size)

    def copied(self, argv, names):
        """names (relative to the mount) copied by argv(dest) into a fresh directory:
        each is the mount's file, byte for byte."""
        dest = tempfile.mkdtemp(prefix="ggufs-test-")
        try:
            subprocess.run(argv(dest), cwd=self.mount.path, check=True, capture_output=True)
            for n in names:
                self.assertEqual(gm.read_file(os.path.join(dest, n)), gm.read_file(self.p(n)),
                                 (argv(dest), n))
        finally:
            shutil.rmtree(dest)

    def test_sparse_aware_copies(self):
        names = ["tensors/output.weight.f32", "tensors/output.weight.npy", "stats.tsv",
                 "stats/output_norm.weight", "gguf.json", "summary.txt",
                 "metadata/general.architecture"]
        for n in names:
            self.assertGreater(os.path.getsize(self.p(n)), 0, n)
        self.copied(lambda d: ["sh", "-c", 'tar -cSf - "$@" | tar -xf - -C "%s"' % d, "tar"]
                    + names, names)
        self.copied(lambda d: ["cp", "--sparse=always", "--parents"] + names + [d], names)
        if shutil.which("rsync"):
            self.copied(lambda d: ["rsync", "-S", "-R"] + names + [d], names)


class LibraryDu(gm.ScratchCase):
    """A model in a library shows what its single mount shows, blocks included: du of a
    library counts each model once (it counted every computed file at its full size)."""
    folders = {"src": "models"}

    def blocks(self, root):
        """{path relative to root: st_blocks} of every file and directory under root,
        compare/ of a library's model directory left out (a single mount has none)."""
        out = {}
        for d, dirs, names in os.walk(root):
            if d == root and "compare" in dirs:
                dirs.remove("compare")
            for n in dirs + names:
                p = os.path.join(d, n)
                out[os.path.relpath(p, root)] = os.stat(p).st_blocks
        return out

    def du(self, path):
        return int(subprocess.run(["du", "-sB1", "--exclude=compare", path],
                                  capture_output=True, text=True, check=True).stdout.split()[0])

    def test_library_blocks_are_the_single_mounts(self):
        shutil.copyfile(gm.TINY, os.path.join(self.src, "tiny.gguf"))
        with gm.Mount(os.path.join(self.src, "tiny.gguf")) as single:
            want, want_du = self.blocks(single.path), self.du(single.path)
        with gm.Mount(self.src) as lib:
            got, got_du = self.blocks(lib.p("tiny")), self.du(lib.p("tiny"))
        self.assertEqual(sorted(got), sorted(want))
        for k in want:
            self.assertEqual(got[k], want[k], k)
        self.assertEqual(got_du, want_du)
        self.assertLess(got_du, 1.05 * os.path.getsize(gm.TINY))


if __name__ == "__main__":
    gm.main()
