#!/usr/bin/env python3
"""`meson install --destdir` puts the binary and the man page where the prefix says
(/usr/local/bin/ggufs and /usr/local/share/man/man1/ggufs.1 by default), and the
installed binary runs. Not a mount test: it never skips.

usage: test_install.py MESON BUILD_DIR BIN_PATH MAN_PATH   (paths absolute, no DESTDIR)"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

MESON, BUILD, BIN, MAN = sys.argv[1:5]


class Install(unittest.TestCase):

    def test_install_destdir(self):
        dest = tempfile.mkdtemp(prefix="ggufs-install-")
        try:
            r = subprocess.run([MESON, "install", "-C", BUILD, "--no-rebuild", "--destdir", dest],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            exe = dest + BIN
            man = dest + MAN
            self.assertTrue(os.path.isfile(exe), exe)
            self.assertTrue(os.access(exe, os.X_OK), exe)
            self.assertEqual(os.stat(exe).st_mode & 0o777, 0o755)
            self.assertTrue(os.path.isfile(man), man)
            with open(man) as f:
                self.assertTrue(f.read().startswith('.\\" ggufs(1)'))
            v = subprocess.run([exe, "--version"], capture_output=True, text=True)
            self.assertEqual(v.returncode, 0)
            self.assertTrue(v.stdout.startswith("ggufs "), v.stdout)
        finally:
            shutil.rmtree(dest)

    @unittest.skipUnless(shutil.which("manpath"), "man-db is not installed")
    def test_man_finds_the_page(self):
        """`man ggufs` works once installed: man-db searches the man directory of the
        prefix whose bin directory is on PATH (the install is not done here)."""
        mandir = os.path.dirname(os.path.dirname(MAN))   # PREFIX/share/man
        env = dict(os.environ, PATH=os.path.dirname(BIN) + ":/usr/bin:/bin")
        env.pop("MANPATH", None)
        r = subprocess.run(["manpath", "-q"], env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(mandir, r.stdout.strip().split(":"))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + sys.argv[5:], verbosity=2)
