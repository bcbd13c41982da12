#!/usr/bin/env python3
"""The log cannot be forged nor turned against its writer:
- a tensor name with a newline, ESC, OSC, BEL (and a backslash) reaches -o log=FILE,
  stderr under -f, and the warnings on stderr before a mount escaped as --check
  escapes it (\\n, \\xHH, \\\\): each event is one line, no control byte gets out;
- -o log=FILE is opened never through a symlink and never waiting on a FIFO, and is
  refused, in one line and before anything is mounted, when it is not a regular file,
  is another user's, is writable by group or others, has another name (a hard link),
  or when a new one would be made in a directory that is another user's or writable
  by group or others."""
import os
import re
import shutil
import stat
import struct
import unittest

import ggufs_mount as gm

GGML_F32 = 0
# a forged log line after a newline, a terminal title (OSC ... BEL), a colour, DEL, and
# a backslash that must not read as an escape
EVIL = "w\n2030-01-01T00:00:00Z ggufs[1]: mnt: forged\r\x1b]0;owned\x07\x1b[31m\x7f\\x0a"
EVIL_SHOWN = ("w\\n2030-01-01T00:00:00Z ggufs[1]: mnt: forged\\r\\x1b]0;owned\\x07"
              "\\x1b[31m\\x7f\\\\x0a")
LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ggufs\[\d+\]: (\S+): (.*)$")


def control_bytes(text):
    """The control bytes of text other than the newlines that end its lines."""
    return [c for c in text if (ord(c) < 0x20 and c != "\n") or ord(c) == 0x7f]


class Escaped(unittest.TestCase):
    def setUp(self):
        self.tmp = gm.public_tmpdir()
        self.model = os.path.join(self.tmp, "evil.gguf")
        data = struct.pack("<64f", *range(64))
        self.offset = gm.write_gguf(self.model, [("general.architecture", "llama")],
                                    [(EVIL, [64], GGML_F32, data)])[0]

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def shrink_and_read(self, m):
        """The model cut before the tensor's bytes, and the tensor read: EIO."""
        os.truncate(self.model, self.offset)
        with self.assertRaises(OSError):
            gm.read_file(m.p("tensors", EVIL))

    def test_log_file(self):
        log = os.path.join(self.tmp, "ggufs.log")
        with gm.Mount(self.model, ["-o", "log=" + log]) as m:
            self.assertIn(EVIL, os.listdir(m.p("tensors")), "the name is the tree's as is")
            self.shrink_and_read(m)
            with open(log, newline="") as f:
                text = f.read()
        self.assertEqual(control_bytes(text), [], repr(text))
        lines = text.splitlines()
        self.assertEqual(len(lines), 2, lines)
        for line in lines:
            g = LINE.match(line)
            self.assertIsNotNone(g, line)
            self.assertEqual(g.group(1), m.path)
        self.assertIn("EIO to a read of tensors/" + EVIL_SHOWN + " (256 bytes at 0)", lines[1])

    def test_stderr_in_foreground(self):
        with gm.Mount(self.model) as m:
            self.shrink_and_read(m)
            err = m.stderr()
        self.assertEqual(control_bytes(err), [], repr(err))
        lines = err.splitlines()
        self.assertEqual(len(lines), 2, lines)
        self.assertTrue(all(line.startswith("ggufs: ") for line in lines), lines)
        self.assertIn("EIO to a read of tensors/" + EVIL_SHOWN + " (", lines[1])

    def test_warning_before_the_mount(self):
        """A tensor of a type with no dequantizer is warned about on stderr before the
        mount (raw file only): its name escaped in that line too (it used to be '?')."""
        model = os.path.join(self.tmp, "unknown.gguf")
        gm.write_gguf(model, [("general.architecture", "llama")],
                      [(EVIL, [32], 1000, b"\0" * 64)])
        mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(mnt)
        r = gm.run_ggufs([model, mnt])
        try:
            err = r.stderr.decode()
            self.assertEqual(r.returncode, 0, err)
            self.assertEqual(control_bytes(err), [], repr(err))
            self.assertEqual(err, "ggufs: %s: warning: tensor '%s' has unknown type 1000: raw "
                             "file only\n" % (model, EVIL_SHOWN) + gm.background_stderr())
        finally:
            gm.unmount(mnt)


class LogFileRules(gm.ScratchCase):
    """Each refusal is one line on stderr naming the file, exit status 1, nothing
    mounted, and nothing written where the name leads."""

    must_not_mount = True   # and self.tmp is 0700, root's

    def setUp(self):
        super().setUp()
        self.log = os.path.join(self.tmp, "ggufs.log")

    def refused(self, log, says):
        r = gm.run_ggufs(["-o", "log=" + log, gm.TINY, self.mnt])
        err = r.stderr.decode()
        self.assertEqual(r.returncode, 1, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.startswith("ggufs: %s: " % log), err)
        self.assertIn(says, err)
        self.assertFalse(gm.is_mounted(self.mnt))

    def test_symlink(self):
        """A link planted at the log's name (to a file of root's): refused, and the
        file it leads to is untouched."""
        target = os.path.join(self.tmp, "precious")
        with open(target, "w") as f:
            f.write("keep\n")
        os.symlink(target, self.log)
        self.refused(self.log, "the log file is a symlink")
        self.assertEqual(gm.read_file(target), b"keep\n")

    def test_fifo(self):
        """A FIFO with no reader: refused at once (the mount used to wait forever)."""
        os.mkfifo(self.log, 0o600)
        self.refused(self.log, "not a regular file (a FIFO)")

    def test_fifo_with_a_reader(self):
        os.mkfifo(self.log, 0o600)
        fd = os.open(self.log, os.O_RDONLY | os.O_NONBLOCK)
        try:
            self.refused(self.log, "not a regular file (a FIFO)")
        finally:
            os.close(fd)

    def test_device(self):
        self.refused("/dev/null", "not a regular file (a character device)")

    def test_directory(self):
        self.refused(self.tmp, "not a regular file (a directory)")

    def test_other_users_file(self):
        open(self.log, "w").close()
        os.chmod(self.log, 0o600)
        os.chown(self.log, gm.NOBODY, gm.NOBODY)
        self.refused(self.log, "owned by uid %d, not by the user mounting (uid %d)"
                     % (gm.NOBODY, os.geteuid()))

    def test_writable_by_others(self):
        for mode in (0o620, 0o602, 0o666):
            with self.subTest(mode=oct(mode)):
                open(self.log, "w").close()
                os.chmod(self.log, mode)
                self.refused(self.log, "writable by group or others (mode %04o)" % mode)
                os.unlink(self.log)

    def test_hard_link(self):
        other = os.path.join(self.tmp, "other")
        with open(other, "w") as f:
            f.write("keep\n")
        os.chmod(other, 0o600)
        os.link(other, self.log)
        self.refused(self.log, "has 2 names (hard links)")
        self.assertEqual(gm.read_file(other), b"keep\n")

    def test_new_file_in_others_directory(self):
        d = os.path.join(self.tmp, "theirs")
        os.mkdir(d, 0o755)
        os.chown(d, gm.NOBODY, gm.NOBODY)
        log = os.path.join(d, "ggufs.log")
        self.refused(log, "would be made in %s, which is owned by uid %d" % (d, gm.NOBODY))
        self.assertFalse(os.path.exists(log))

    def test_new_file_in_shared_directory(self):
        for mode in (0o775, 0o1777):
            with self.subTest(mode=oct(mode)):
                d = os.path.join(self.tmp, "shared%o" % mode)
                os.mkdir(d)
                os.chmod(d, mode)
                log = os.path.join(d, "ggufs.log")
                self.refused(log, "would be made in %s, which is writable by group or others "
                             "(mode %04o)" % (d, mode))
                self.assertFalse(os.path.exists(log))

    def test_good_file_made_and_appended(self):
        """The rules let the ordinary case through: a new file (made 0600) in the
        user's own directory, and the same file again at the next mount."""
        for _ in range(2):
            with gm.Mount(gm.TINY, ["-o", "log=" + self.log], mountpoint=self.mnt) as m:
                self.assertEqual(m.stderr(), "")
            st = os.stat(self.log)
            self.assertTrue(stat.S_ISREG(st.st_mode))
            self.assertEqual(st.st_mode & 0o777, 0o600)


if __name__ == "__main__":
    gm.main()
