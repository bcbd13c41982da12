#!/usr/bin/env python3
"""Who may read a mount: without allow_other only the user who mounted it (others get
EACCES, as for every FUSE mount); with allow_other everyone, with default_permissions
in effect, so the modes decide; and the modes are never wider than the GGUF file's:
its read bits limit every file and directory, its owner and group are theirs.
Other users are played by forked children that setuid to nobody (65534) and 65533."""
import errno
import os
import shutil
import stat
import tempfile
import unittest

import ggufs_mount as gm

OTHER = 65533  # neither root nor nobody


def mount_options(path):
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[1] == path:
                return fields[3].split(",")
    raise AssertionError("%s is not in /proc/mounts" % path)


def modes(m):
    """{path relative to the mount: filemode string} of the root, the two directories
    and a file of each kind."""
    paths = ["", "metadata", "tensors", "gguf.json", "summary.txt",
             "metadata/general.name", "tensors/output.weight", "tensors/output.weight.f32",
             "tensors/output.weight.npy"]
    return {p: stat.filemode(os.stat(m.p(p)).st_mode) for p in paths}


def read(path):
    with open(path, "rb") as f:
        f.read()


class Permissions(unittest.TestCase):

    def setUp(self):
        self.tmp = gm.public_tmpdir()
        self.model = os.path.join(self.tmp, "model.gguf")
        shutil.copyfile(gm.TINY, self.model)
        os.chmod(self.model, 0o644)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def as_nobody(self, fn, *args, uid=gm.NOBODY):
        r = gm.errno_as_nobody(fn, *args, uid=uid)
        self.assertNotEqual(r, 255, "the child failed otherwise")
        return r

    def test_only_the_mounting_user(self):
        with gm.Mount(self.model) as m:
            opts = mount_options(m.path)
            self.assertNotIn("allow_other", opts)
            self.assertIn("default_permissions", opts)
            self.assertIn("ro", opts)
            # the modes would let anyone read: it is FUSE that says no
            self.assertEqual(modes(m)["metadata/general.name"], "-r--r--r--")
            self.assertEqual(self.as_nobody(os.listdir, m.path), errno.EACCES)
            self.assertEqual(self.as_nobody(os.stat, m.p("gguf.json")), errno.EACCES)
            self.assertEqual(self.as_nobody(read, m.p("metadata", "general.name")), errno.EACCES)
            self.assertEqual(os.listdir(m.path), ["metadata", "tensors", "gguf.json", "summary.txt",
                                                  "stats", "stats.tsv", "model.gguf", "quants"])

    def test_allow_other(self):
        with gm.Mount(self.model, ["-o", "allow_other"]) as m:
            opts = mount_options(m.path)
            self.assertIn("allow_other", opts)
            self.assertIn("default_permissions", opts)
            want = {p: "dr-xr-xr-x" for p in ("", "metadata", "tensors")}
            self.assertEqual(modes(m), dict(dict.fromkeys(modes(m), "-r--r--r--"), **want))
            for p in ("", "metadata", "tensors"):
                self.assertEqual(self.as_nobody(os.listdir, m.p(p)), 0, p)
            for p in ("gguf.json", "summary.txt", "metadata/general.name",
                      "tensors/output.weight.f32"):
                self.assertEqual(self.as_nobody(read, m.p(p)), 0, p)
            # read-only for them too
            self.assertEqual(self.as_nobody(open, m.p("x"), "w"), errno.EROFS)

    def test_modes_follow_the_model(self):
        cases = [
            # model mode, owner: file mode, directory mode, nobody reads, OTHER reads
            (0o600, 0, "-r--------", "dr-x------", errno.EACCES, errno.EACCES),
            (0o640, 0, "-r--r-----", "dr-xr-x---", errno.EACCES, errno.EACCES),
            (0o604, 0, "-r-----r--", "dr-x---r-x", 0, 0),
            (0o755, 0, "-r--r--r--", "dr-xr-xr-x", 0, 0),  # no x, no w, ever
            (0o400, gm.NOBODY, "-r--------", "dr-x------", 0, errno.EACCES),
            (0o040, gm.NOBODY, "----r-----", "d---r-x---", errno.EACCES, errno.EACCES),
        ]
        for mode, owner, fmode, dmode, nobody, other in cases:
            with self.subTest(mode=oct(mode), owner=owner):
                os.chown(self.model, owner, owner)
                os.chmod(self.model, mode)
                with gm.Mount(self.model, ["-o", "allow_other"]) as m:
                    got = modes(m)
                    for p, s in got.items():
                        self.assertEqual(s, dmode if p in ("", "metadata", "tensors") else fmode, p)
                    st = os.stat(m.p("tensors", "output.weight"))
                    self.assertEqual((st.st_uid, st.st_gid), (owner, owner))
                    gname = m.p("metadata", "general.name")
                    self.assertEqual(self.as_nobody(read, gname), nobody)
                    self.assertEqual(self.as_nobody(read, gname, uid=OTHER), other)
                    if nobody == 0:
                        self.assertEqual(self.as_nobody(os.listdir, m.p("tensors")), 0)
                    # root is root
                    self.assertEqual(gm.read_file(gname), b"tinyllama-test\n")


if __name__ == "__main__":
    gm.main()
