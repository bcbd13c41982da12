#!/usr/bin/env python3
"""An s3:// library over a bucket others write to (issue 37, items 7-10, 12, 13), against
the fault server in S3 mode (s3auth.py):

- a lookup is answered from its folder's listing: 20 reads of a built model's metadata
  cost no listing request beyond the folder's first;
- a listing that hangs holds up no lookup or read elsewhere in the library (the source
  is listed without the library's lock);
- an endpoint whose continuation tokens go round (A, B, A, ...) is refused at once;
- keys come URL-encoded (encoding-type=url): a key with ESC in it, which XML 1.0 cannot
  hold, is one entry left out, not a folder that cannot be listed; keys with a newline
  or a tab are left out too, from a server that sends keys raw as well;
- an object's version is its ETag and size: a listing's LastModified a second off the
  object's, or absent, still serves the model; a changed object is ESTALE;
- names longer than 255 bytes are left out with a log line;
- a folder that holds only names left out (lib/a/../../x.gguf) is an empty folder,
  not gone once looked in."""
import errno
import os
import subprocess
import sys
import tempfile
import time
import unittest

from remote_common import TinyCase, EnvMount, FaultServer, gm, read_bounded
from s3auth import S3Auth

AKID = "AKIAGGUFSTEST0000001"
SECRET = "s3cr3t/Must+Not=Leak0000000000000000000"
# a read or listing that the fixes make prompt; generous for a loaded machine
PROMPT_S = 15.0


def aws_env(home, url):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and k not in ("HF_TOKEN", "HF_ENDPOINT")}
    env.update(HOME=home, AWS_ACCESS_KEY_ID=AKID, AWS_SECRET_ACCESS_KEY=SECRET,
               AWS_ENDPOINT_URL=url)
    return env


def tiny_model(arch):
    """A small model's bytes whose general.architecture is arch."""
    import struct
    fd, path = tempfile.mkstemp(suffix=".gguf")
    os.close(fd)
    try:
        gm.write_gguf(path, [("general.architecture", arch), ("general.name", "n-" + arch)],
                      [("t", [4], gm.GGML_F32, struct.pack("<4f", 0, 1, 2, 3))])
        return gm.read_file(path)
    finally:
        os.unlink(path)


LISTER = """
import os, sys
print(sorted(os.listdir(sys.argv[1])))
"""


class S3Library(TinyCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="ggufs-s3lib-home-")

    def tearDown(self):
        os.rmdir(self.home)

    def server(self, files):
        s = FaultServer(files)
        s.s3 = S3Auth({AKID: (SECRET, None)})
        return s

    def mount(self, s, name="s3://models/lib/"):
        return EnvMount(name, env=aws_env(self.home, s.url))

    def test_lookups_answered_from_the_listing(self):
        files = {"/models/lib/m.gguf": tiny_model("one")}
        for i in range(30):
            files["/models/lib/f%02d.bin" % i] = b"x"
        with self.server(files) as s:
            s.s3.page_size = 10   # the folder in 4 pages
            with self.mount(s) as m:
                for _ in range(20):
                    self.assertEqual(gm.read_file(m.p("m", "metadata", "general.architecture")),
                                     b"one\n")
                    self.assertTrue(os.path.exists(m.p("f07.bin")))
                self.assertEqual(len(os.listdir(m.path)), 33)
            # the folder's one listing, at mount: 4 pages, and nothing after
            self.assertEqual(len(s.s3.lists), 4, s.s3.lists)

    def test_a_hanging_listing_holds_up_nothing_else(self):
        files = {"/models/lib/m.gguf": tiny_model("one"), "/models/lib/slow/x.bin": b"x"}
        with self.server(files) as s, self.mount(s) as m:
            self.assertEqual(gm.read_file(m.p("m", "metadata", "general.architecture")),
                             b"one\n")
            s.stall = True
            lister = subprocess.Popen([sys.executable, "-c", LISTER, m.p("slow")],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                deadline = time.monotonic() + PROMPT_S
                while not [q for q in s.s3.lists if "slow" in q] and time.monotonic() < deadline:
                    # the server logs a request once answered: wait for the daemon to
                    # be in it instead
                    if s.stalled() and lister.poll() is None:
                        time.sleep(0.5)
                        break
                    time.sleep(0.05)
                # the built model and the root, read while slow/ is being listed
                err, got, took = read_bounded(m.p("m", "metadata", "general.architecture"), 0,
                                              100, PROMPT_S, direct=False)
                self.assertEqual((err, got), (0, b"one\n"))
                self.assertIn("m", os.listdir(m.path))
                self.assertIsNone(lister.poll(), "the listing of slow/ was not held")
            finally:
                s.stall = False
                out, _ = lister.communicate(timeout=60)
            self.assertEqual(out.decode().strip(), "['x.bin']")

    def test_tokens_that_go_round_are_refused(self):
        with self.server({"/models/lib/a.bin": b"a", "/models/lib/b.bin": b"b"}) as s:
            s.s3.page_size = 1
            s.s3.tokens_cycle = True
            start = time.monotonic()
            err = gm.refused_mount(["s3://models/lib/"], env=aws_env(self.home, s.url),
                                   prefix="ggufs-s3lib-mnt-")
            self.assertLess(time.monotonic() - start, PROMPT_S)
            self.assertIn("continuation token", err)
            self.assertLess(len(s.s3.lists), 10)

    def test_control_bytes_left_out_per_entry(self):
        files = {"/models/lib/esc\x1bx.txt": b"e", "/models/lib/nl\nx.txt": b"n",
                 "/models/lib/tab\tx.txt": b"t", "/models/lib/ok.txt": b"ok",
                 "/models/lib/sp ace+plus%41.txt": b"sp", "/models/lib/d\x01ir/z.txt": b"z"}
        with self.server(files) as s:
            for encoded in (True, False):
                s.s3.url_encoding = encoded
                if not encoded:   # raw, ESC and ^A cannot be sent at all (not XML 1.0)
                    s.remove("/models/lib/esc\x1bx.txt")
                    s.remove("/models/lib/d\x01ir/z.txt")
                with self.subTest(url_encoding=encoded), self.mount(s) as m:
                    self.assertEqual(sorted(os.listdir(m.path)),
                                     ["models.json", "models.tsv", "ok.txt",
                                      "sp ace+plus%41.txt"])
                    self.assertEqual(gm.read_file(m.p("sp ace+plus%41.txt")), b"sp")
                    self.assertIn("left out", m.stderr())
                    self.assertIn("control byte", m.stderr())
            self.assertTrue(all("encoding-type=url" in q for q in s.s3.lists), s.s3.lists)

    def test_version_is_etag_and_size(self):
        files = {"/models/lib/m.gguf": tiny_model("one"), "/models/lib/n.gguf": tiny_model("two")}
        with self.server(files) as s:
            for shift, absent in ((1, False), (-1, False), (0, True)):
                s.s3.mtime_shift, s.s3.mtime_absent = shift, absent
                with self.subTest(shift=shift, absent=absent), self.mount(s) as m:
                    self.assertEqual(gm.read_file(m.p("m", "metadata", "general.architecture")),
                                     b"one\n")
                    # the object replaced after the listing: its ETag says so
                    s.swap("/models/lib/n.gguf", tiny_model("owt"))
                    with self.assertRaises(OSError) as e:
                        gm.read_file(m.p("n", "metadata", "general.architecture"))
                    self.assertEqual(e.exception.errno, errno.ESTALE)
                    s.swap("/models/lib/n.gguf", tiny_model("two"))

    def test_names_longer_than_255_bytes_left_out(self):
        long, fits = "a" * 252 + ".txt", "b" * 251 + ".txt"
        files = {"/models/lib/" + long: b"l", "/models/lib/" + fits: b"f",
                 "/models/lib/" + "c" * 256 + "/x.txt": b"x"}
        with self.server(files) as s, self.mount(s) as m:
            self.assertEqual(len(long.encode()), 256)
            self.assertEqual(sorted(os.listdir(m.path)), sorted(["models.json", "models.tsv", fits]))
            self.assertEqual(gm.read_file(m.p(fits)), b"f")
            self.assertIn("longer than 255 bytes", m.stderr())

    def test_a_folder_of_names_left_out_is_empty(self):
        """Issue 43 item 12: a folder whose every key is refused (a/../../x.gguf, one
        with a tab) shows in its parent and, looked in, is empty, not gone: os.listdir
        is [], and find over the mount exits 0 (it printed "No such file or
        directory")."""
        files = {"/models/lib/a/../../escape2.gguf": tiny_model("one"),
                 "/models/lib/b/tab\tx.txt": b"t",
                 "/models/lib/ok.txt": b"ok"}
        with self.server(files) as s, self.mount(s) as m:
            root = ["a", "b", "models.json", "models.tsv", "ok.txt"]
            self.assertEqual(sorted(os.listdir(m.path)), root)
            for name in ("a", "b"):
                self.assertEqual(os.listdir(m.p(name)), [], name)
                self.assertTrue(os.path.isdir(m.p(name)), name)
            self.assertEqual(sorted(os.listdir(m.path)), root)
            found = subprocess.run(["find", m.path], capture_output=True, timeout=60)
            self.assertEqual((found.returncode, found.stderr), (0, b""))
            self.assertEqual(sorted(found.stdout.decode().split("\n")),
                             sorted(["", m.path] + [m.p(n) for n in root]))
            self.assertIn("left out", m.stderr())

if __name__ == "__main__":
    gm.main()
