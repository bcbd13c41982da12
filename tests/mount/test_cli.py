#!/usr/bin/env python3
"""The command line: refused models and bad arguments (one line, exit status, nothing
mounted), --help and --version, daemon mode, signals, and a model that shrinks under
the mount."""
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import ggufs_mount as gm


def wait_mounted(test, p):
    """Waits until test.mnt is mounted by foreground daemon p: fails the test when p
    ends first or the mount takes longer than gm.MOUNT_TIMEOUT."""
    deadline = time.monotonic() + gm.MOUNT_TIMEOUT
    while not gm.is_mounted(test.mnt):
        test.assertIsNone(p.poll())
        test.assertLess(time.monotonic(), deadline)
        time.sleep(0.02)


class Refused(gm.RefusedMountCase):
    """Whatever is wrong, ggufs says so in one line and mounts nothing."""

    def refused(self, args, status=1, contains=None):
        r = gm.run_ggufs(args)
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, status, err)
        self.assertEqual(r.stdout, b"")
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, "exactly one line on stderr: %r" % err)
        self.assertTrue(err.endswith("\n"))
        self.assertTrue(lines[0].startswith("ggufs: "), lines[0])
        if contains:
            self.assertIn(contains, lines[0])
        self.assertFalse(gm.is_mounted(self.mnt))
        self.assertEqual(os.listdir(self.mnt), [])
        return lines[0]

    def model_copy(self, nbytes=None, name="model.gguf"):
        path = os.path.join(self.tmp, name)
        data = gm.read_file(gm.TINY)
        with open(path, "wb") as f:
            f.write(data if nbytes is None else data[:nbytes])
        return path

    def mount_as_nobody(self, path):
        """`ggufs path self.mnt` run as nobody, the mount point nobody's, from a copy of
        the binary that nobody may run (the build directory may be private): its end."""
        os.chmod(self.tmp, 0o755)
        os.chown(self.mnt, gm.NOBODY, gm.NOBODY)
        exe = os.path.join(self.tmp, "ggufs")
        shutil.copy(gm.GGUFS, exe)
        os.chmod(exe, 0o755)
        return subprocess.run([exe, path, self.mnt], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=gm.MOUNT_TIMEOUT,
                              preexec_fn=gm.drop_to_nobody)

    def test_truncated_names_the_tensor(self):
        size = os.path.getsize(gm.TINY)
        path = self.model_copy(size - 1)
        line = self.refused([path, self.mnt], contains=path)
        self.assertIn("past the end", line)

    def test_not_gguf(self):
        path = os.path.join(self.tmp, "text.gguf")
        with open(path, "w") as f:
            f.write("hello, world\n" * 100)
        self.refused([path, self.mnt], contains=path)

    def test_empty_file(self):
        path = os.path.join(self.tmp, "empty.gguf")
        open(path, "w").close()
        self.refused([path, self.mnt], contains=path)

    def test_missing_model(self):
        path = os.path.join(self.tmp, "missing.gguf")
        self.refused([path, self.mnt], contains=path)

    def test_directory_as_model(self):
        self.refused([self.tmp, self.mnt], contains=self.tmp)

    def test_unreadable_model(self):
        """Mode 000, run as nobody (root reads everything): refused before the mount,
        which nobody could not do anyway."""
        path = self.model_copy()
        os.chmod(path, 0)
        r = self.mount_as_nobody(path)
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 1, err)
        self.assertEqual(err, "ggufs: %s: %s\n" % (path, os.strerror(errno.EACCES)))
        self.assertFalse(gm.is_mounted(self.mnt))

    def test_missing_mountpoint(self):
        """Said to be the mount point (not a missing model), with the command that
        makes it."""
        mnt = os.path.join(self.tmp, "nowhere")
        line = self.refused([gm.TINY, mnt], contains=mnt)
        self.assertIn("mount point does not exist", line)
        self.assertIn("mkdir -p " + mnt, line)
        self.assertFalse(os.path.exists(mnt))

    def test_missing_mountpoint_read_only(self):
        """A missing mount point under a folder that cannot be written (here inside a
        ggufs mount, read-only) is not answered with a mkdir -p that would fail too
        (issue 38 item 12)."""
        with gm.Mount(gm.TINY) as m:
            mnt = m.p("metadata", "nowhere")
            line = self.refused([gm.TINY, mnt], contains=mnt)
            self.assertIn("mount point does not exist", line)
            self.assertNotIn("mkdir", line)
            self.assertIn("%s cannot be written (%s)" % (m.p("metadata"),
                                                         os.strerror(errno.EROFS)), line)

    def test_swapped_operands(self):
        """ggufs MOUNTPOINT MODEL: an empty folder first and a file second says that
        the operands look swapped (issue 38 item 12); a file that is not a folder
        without that says only so."""
        line = self.refused([self.mnt, gm.TINY], contains=gm.TINY)
        self.assertIn("the operands look swapped", line)
        self.assertIn(self.mnt, line)
        line = self.refused([gm.TINY, gm.TINY], contains=gm.TINY)
        self.assertNotIn("swapped", line)
        self.assertIn("not a directory", line)

    def test_log_file_refused(self):
        """-o log=FILE that cannot be opened: refused at mount, not lost later."""
        path = os.path.join(self.tmp, "no-such-dir", "ggufs.log")
        line = self.refused(["-o", "log=" + path, gm.TINY, self.mnt], contains=path)
        self.assertIn("cannot open the log file", line)
        self.assertIn(os.strerror(errno.ENOENT), line)

    def test_fifo_as_model(self):
        """A FIFO is refused at once, mount and --check alike (open used to wait for a
        writer before the type was seen)."""
        path = os.path.join(self.tmp, "pipe.gguf")
        os.mkfifo(path)
        self.refused([path, self.mnt], contains=path + ": not a regular file")
        self.refused(["--check", path], status=3, contains=path + ": not a regular file")

    def test_unsupported_scheme(self):
        """ftp:// and the like: the schemes that work are named (not "No such file")."""
        for url in ("ftp://host/x.gguf", "gs://bucket/x.gguf"):
            line = self.refused([url, self.mnt], contains=url)
            self.assertIn("unsupported URL scheme '%s'" % url.split(":")[0], line)
            self.assertIn("http://, https://, hf:// and s3://", line)
        # a local directory that happens to be called "ftp:" is still a local file
        os.makedirs(os.path.join(self.tmp, "ftp:", "host"))
        shutil.copy(gm.TINY, os.path.join(self.tmp, "ftp:", "host", "x.gguf"))
        r = subprocess.run([gm.GGUFS, "--check", "ftp://host/x.gguf"], cwd=self.tmp,
                           capture_output=True, timeout=gm.MOUNT_TIMEOUT)
        self.assertNotIn(b"unsupported", r.stderr)
        self.assertIn(b"tensors checked", r.stdout)

    def test_dev_fuse_denied(self):
        """A user who cannot open /dev/fuse (nobody, where it is not 0666) gets a ggufs
        line saying what a mount needs, not libfuse's."""
        try:
            st = os.stat("/dev/fuse")
        except FileNotFoundError:
            self.skipTest("no /dev/fuse")
        if st.st_mode & 0o006 == 0o006:
            self.skipTest("/dev/fuse is open to every user here")
        path = self.model_copy()
        os.chmod(path, 0o644)
        r = self.mount_as_nobody(path)
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 1, err)
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("ggufs: /dev/fuse: "), lines[0])
        for words in ("read and write access", "root", "0666", "group"):
            self.assertIn(words, lines[0])
        self.assertFalse(gm.is_mounted(self.mnt))

    def test_mountpoint_is_a_file(self):
        path = self.model_copy()
        self.refused([gm.TINY, path], contains=path)

    def test_bad_model_and_bad_mountpoint(self):
        # one line, whichever is reported
        self.refused([os.path.join(self.tmp, "missing.gguf"), os.path.join(self.tmp, "nowhere")])

    def test_mountpoint_not_empty(self):
        """Mounting would hide what is there: refused unless -o nonempty, which
        mounts over it; the files are back after unmounting."""
        with open(os.path.join(self.mnt, "keep"), "w") as f:
            f.write("mine\n")
        r = gm.run_ggufs([gm.TINY, self.mnt])
        lines = r.stderr.decode().splitlines()
        self.assertEqual(r.returncode, 1, lines)
        self.assertEqual(lines, ["ggufs: %s: not empty (-o nonempty mounts over it)" % self.mnt])
        self.assertFalse(gm.is_mounted(self.mnt))
        with gm.Mount(gm.TINY, ["-o", "nonempty"], mountpoint=self.mnt):
            self.assertEqual(sorted(os.listdir(self.mnt)),
                             ["gguf.json", "metadata", "model.gguf", "quants", "stats", "stats.tsv",
                              "summary.txt", "tensors"])
        self.assertEqual(os.listdir(self.mnt), ["keep"])
        os.unlink(os.path.join(self.mnt, "keep"))

    def test_already_mounted(self):
        """A second ggufs on a live mount is refused, naming what is mounted there;
        nothing is stacked."""
        with gm.Mount(gm.TINY, mountpoint=self.mnt):
            r = gm.run_ggufs([gm.TINY, self.mnt])
            lines = r.stderr.decode().splitlines()
            self.assertEqual(r.returncode, 1, lines)
            self.assertEqual(lines, ["ggufs: %s: already mounted (fuse.ggufs %s): unmount it first"
                                     % (self.mnt, os.path.realpath(gm.TINY))])
            with open("/proc/self/mountinfo") as f:
                here = [l for l in f if l.split()[4] == self.mnt]
            self.assertEqual(len(here), 1, here)

    def test_dead_mount(self):
        """A mount whose daemon was killed: one line that says so."""
        p = subprocess.Popen([gm.GGUFS, "-f", gm.TINY, self.mnt], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_mounted(self, p)
            p.kill()
            p.wait()
            r = gm.run_ggufs([gm.TINY, self.mnt])
            lines = r.stderr.decode().splitlines()
            self.assertEqual(r.returncode, 1, lines)
            self.assertEqual(lines, ["ggufs: %s: %s (a FUSE mount whose daemon is gone: unmount it)"
                                     % (self.mnt, os.strerror(errno.ENOTCONN))])
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            gm.unmount(self.mnt)

    def test_argument_errors(self):
        """Every wrong argument: exit 2, one `ggufs:` line that names it and points to
        --help, checked before the model or the mount point is touched (both missing
        here, or the model the wrong file: the argument is still what is named)."""
        missing_model = os.path.join(self.tmp, "missing.gguf")
        missing_mnt = os.path.join(self.tmp, "nowhere")
        cases = [
            (["--bogus", gm.TINY, self.mnt], "'--bogus'"),
            (["--bogus", missing_model, missing_mnt], "'--bogus'"),
            (["-x", gm.TINY, self.mnt], "'-x'"),
            (["-fd", gm.TINY, self.mnt], "'-fd'"),
            (["-", gm.TINY, self.mnt], "'-'"),
            (["-o", "bogusopt", gm.TINY, self.mnt], "'-o bogusopt'"),
            (["-obogusopt", missing_model, missing_mnt], "'-o bogusopt'"),
            (["-o", "ro,allow_other,bogusopt,nonempty", gm.TINY, self.mnt], "'-o bogusopt'"),
            (["-o", "relatime", gm.TINY, self.mnt], "'-o relatime'"),  # libfuse's refusal
            (["-o", "allow_other=1", gm.TINY, self.mnt], "'-o allow_other=1'"),
            (["-o", "max_read", gm.TINY, self.mnt], "'-o max_read'"),
            (["-o", "max_read=lots", gm.TINY, self.mnt], "'-o max_read=lots'"),
            (["-o", "max_threads=99999999999", gm.TINY, self.mnt], "'-o max_threads=99999999999'"),
            (["-o", "ro,,allow_other", gm.TINY, self.mnt], "'-o ro,,allow_other'"),
            ([gm.TINY, self.mnt, "-o"], "'-o'"),
            (["-o"], "'-o'"),
            ([], "MODEL.gguf and MOUNTPOINT"),
            ([gm.TINY], "missing MOUNTPOINT"),
            ([missing_model], "missing MOUNTPOINT"),
            ([gm.TINY, self.mnt, "extra"], "'extra'"),
            ([gm.TINY, self.mnt, self.mnt], "'%s'" % self.mnt),
            (["", self.mnt], "empty MODEL.gguf"),
            ([gm.TINY, ""], "empty MOUNTPOINT"),
            (["--bogus", "--help"], "'--bogus'"),
        ]
        for args, named in cases:
            with self.subTest(args=args):
                line = self.refused(args, status=2, contains=named)
                self.assertIn("ggufs --help", line)
                self.assertNotIn("fuse:", line)
        self.assertFalse(os.path.exists(missing_mnt))

    def test_zero_refused(self):
        """One rule for zero: every option that takes a number or a size refuses 0 (in
        any spelling: 0, 00, 0K) with exit 2 and a line saying that the least is 1 and
        that leaving the option out gives its default; 1 is accepted by each."""
        numeric = ["timeout", "cache_size", "cache_max", "max_read", "max_threads",
                   "max_idle_threads", "quant_threads"]
        for name in numeric:
            for zero in ("0", "00") + (("0K", "0M") if name.startswith("cache_") else ()):
                item = "%s=%s" % (name, zero)
                line = self.refused(["-o", item, gm.TINY, self.mnt], status=2,
                                    contains="'-o %s'" % item)
                self.assertIn("0 is not allowed, the least is 1", line)
                self.assertIn("leave the option out for its default", line)
        # --check takes the remote ones, under the same rule
        self.refused(["--check", "-o", "timeout=0", gm.TINY], status=2,
                     contains="'-o timeout=0'")
        # every option of ggufs --help that takes N, SIZE or SECONDS is in the list
        out = gm.run_ggufs(["--help"]).stdout.decode()
        documented = set(re.findall(r"-o (\w+)=(?:N|SIZE|SECONDS)\b", out))
        self.assertEqual(documented, set(numeric))
        for name in numeric:
            r = subprocess.run([gm.GGUFS, "--check", "-o", name + "=1", gm.TINY],
                               capture_output=True, timeout=gm.MOUNT_TIMEOUT)
            if name in ("timeout", "cache_size", "cache_max"):
                self.assertNotEqual(r.returncode, 2, r.stderr)
            else:   # a mount option: refused by --check, but not for its value
                self.assertIn(b"does not go with --check", r.stderr)

    def test_end_of_options(self):
        """After --, everything is an operand; --help and --version need none."""
        with gm.Mount(gm.TINY, ["--"]) as m:
            self.assertEqual(gm.read_file(m.p("metadata", "general.name")), b"tinyllama-test\n")
        for args in (["--help", "extra", "args", "x"], ["-V"]):
            self.assertEqual(gm.run_ggufs(args).returncode, 0)


class Info(unittest.TestCase):
    def test_version(self):
        for opt in ["-V", "--version"]:
            r = gm.run_ggufs([opt])
            self.assertEqual(r.returncode, 0)
            self.assertRegex(r.stdout.decode(), r"^ggufs \d+\.\d+\.\d+")

    def test_help(self):
        for opt in ["-h", "--help"]:
            r = gm.run_ggufs([opt])
            self.assertEqual(r.returncode, 0)
            self.assertEqual(r.stderr, b"")
            out = r.stdout.decode()
            self.assertIn("MODEL.gguf MOUNTPOINT", out)
            self.assertIn("man ggufs", out)
            self.assertIn("man -l man/ggufs.1", out)
            for word in ["-f", "-d", "-s", "-o", "allow_other", "nonempty"]:
                self.assertIn(word, out)
            self.assertTrue(all(len(l) <= 80 for l in out.splitlines()), out)

    def test_help_lists_every_documented_option(self):
        """Each option the man page's OPTIONS section documents has its own line in
        --help, and each -o option listed there is accepted (a mount with it works)."""
        man = open(os.path.join(gm.DATA, "..", "..", "man", "ggufs.1")).read()
        section = man[man.index("\n.SH OPTIONS\n"):man.index("\n.SH THE TREE\n")]
        # every .TP item: "-f", "--help", "allow_other", "max_read=" ...
        items = re.findall(r"^\.TP\n\.B[IR]? ([^\n]+)$", section, re.M)
        names = set()
        for item in items:
            words = [w.rstrip(",") for w in item.replace("\\-", "-").replace('"', " ").split()]
            names |= {w for w in words if re.match(r"^--?[a-zA-Z]+$", w)}
            if re.match(r"^[a-z_]+=?$", words[0]):  # an -o option: nonempty, max_read=
                names.add(words[0])
        for must in ("-f", "--help", "nonempty", "allow_other", "max_read=", "max_threads=",
                     "clone_fd", "auto_unmount", "allow_root"):
            self.assertIn(must, names)
        help_lines = gm.run_ggufs(["--help"]).stdout.decode().splitlines()
        for name in sorted(names):
            with self.subTest(option=name):
                if name.startswith("-"):
                    pat = r"^    (-\w, )?%s[\s,]" % re.escape(name)
                else:
                    pat = r"^    -o %s%s\s" % (re.escape(name), r"[A-Z]+" if name.endswith("=") else "")
                self.assertTrue(any(re.match(pat, l) for l in help_lines), name)


class Daemon(gm.ScratchCase):

    def wait_gone(self, timeout=20):
        deadline = time.monotonic() + timeout
        while gm.ggufs_processes(self.mnt):
            if time.monotonic() > deadline:
                self.fail("the daemon is still running after unmount")
            time.sleep(0.05)

    def test_daemonizes_once_mounted(self):
        """Without -f, ggufs returns only once the mount is ready, and a daemon
        serves it."""
        env = dict(os.environ)
        asan_log = os.path.join(self.tmp, "asan")
        # the daemon's stderr is /dev/null: a sanitizer report goes to a file instead
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":log_path=" + asan_log).lstrip(":")
        env["UBSAN_OPTIONS"] = (env.get("UBSAN_OPTIONS", "") + ":log_path=" + asan_log).lstrip(":")
        r = gm.run_ggufs([gm.TINY, self.mnt], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.decode(), gm.background_stderr())
        self.assertTrue(gm.is_mounted(self.mnt), "mounted when ggufs returns")
        self.assertEqual(gm.read_file(os.path.join(self.mnt, "metadata", "general.name")),
                         b"tinyllama-test\n")
        self.assertTrue(gm.ggufs_processes(self.mnt))
        gm.unmount(self.mnt)
        self.assertFalse(gm.is_mounted(self.mnt))
        self.wait_gone()
        logs = [f for f in os.listdir(self.tmp) if f.startswith("asan")]
        reports = "".join(open(os.path.join(self.tmp, f)).read() for f in logs)
        self.assertEqual(reports, "")

    def test_relative_paths_and_sigterm_to_the_daemon(self):
        """The daemon runs in "/": relative model and mount point still work, and
        SIGTERM unmounts the right directory."""
        odd = os.path.join(self.tmp, "a,b\\c")
        os.mkdir(odd)
        shutil.copyfile(gm.TINY, os.path.join(odd, "m.gguf"))
        rel = "mnt-%d-%d" % (os.getpid(), time.monotonic_ns())  # unique: found by name below
        mnt = os.path.join(odd, rel)
        os.mkdir(mnt)
        r = subprocess.run([gm.GGUFS, "m.gguf", rel], cwd=odd, stdin=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=gm.MOUNT_TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            self.assertTrue(gm.is_mounted(mnt))
            self.assertEqual(gm.read_file(os.path.join(mnt, "metadata", "general.name")),
                             b"tinyllama-test\n")
            pids = gm.ggufs_processes(rel)
            self.assertEqual(len(pids), 1)
            os.kill(pids[0], signal.SIGTERM)
            deadline = time.monotonic() + 20
            while gm.is_mounted(mnt) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertFalse(gm.is_mounted(mnt))
        finally:
            gm.unmount(mnt)

    def test_sigterm_unmounts(self):
        p = subprocess.Popen([gm.GGUFS, "-f", gm.TINY, self.mnt], stdin=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        try:
            wait_mounted(self, p)
            os.listdir(self.mnt)
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(timeout=20), 0)
            self.assertFalse(gm.is_mounted(self.mnt))
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stderr.close()

    def test_mount_shows_the_model(self):
        with gm.Mount(gm.TINY) as m:
            with open("/proc/self/mountinfo") as f:
                line = [l for l in f if (" " + m.path + " ") in l][0]
            self.assertIn("fuse.ggufs", line)
            self.assertIn(os.path.realpath(gm.TINY), line)
            self.assertIn(" ro,", line.split(" - ")[0] + ",")


class Options(unittest.TestCase):

    def largest_read(self, opts):
        """Mounts with -d and opts, reads a large file in 1 MiB O_DIRECT slices and
        returns the largest read the daemon answered (from the debug output), after
        checking the bytes against a read from a mount without options."""
        name = "output.weight.f32"
        with gm.Mount(gm.TINY) as m:
            want = gm.read_file(m.p("tensors", name))
        with gm.Mount(gm.TINY, ["-d"] + opts) as m:
            got = b"".join(gm.pread_direct(m.p("tensors", name), 1 << 20, off)
                           for off in range(0, len(want), 1 << 20))
            self.assertEqual(got, want)
            log = m.stderr()
        reads = set(re.findall(r"unique: (\d+), opcode: READ ", log))
        sizes = [int(size) - 16 for u, size in  # minus the 16-byte reply header
                 re.findall(r"unique: (\d+), success, outsize: (\d+)", log) if u in reads]
        self.assertTrue(sizes, log[-2000:])
        return max(sizes)

    def test_max_read(self):
        """-o max_read=N limits every read to N bytes, and the mount works (libfuse
        drops the connection unless init repeats the number)."""
        self.assertGreater(self.largest_read([]), 65536)
        self.assertLessEqual(self.largest_read(["-o", "max_read=65536"]), 65536)
        self.assertLessEqual(self.largest_read(["-o", "ro,max_read=8192,allow_other"]), 8192)


class Shrunk(unittest.TestCase):
    """The model file is truncated or replaced under the mount: reads of the bytes that
    are gone fail with EIO, everything else is still served, the daemon survives; a
    file renamed over the model's path changes nothing."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ggufs-test-")
        self.model = os.path.join(self.tmp, "model.gguf")
        shutil.copyfile(gm.TINY, self.model)
        self.orig = gm.read_file(gm.TINY)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def tensors(self, m):
        """{raw file name: (absolute offset, size)}, read before anything is cut."""
        out = {}
        for name in os.listdir(m.p("tensors")):
            if not name.endswith((".f32", ".npy")):
                p = m.p("tensors", name)
                out[name] = (int(os.getxattr(p, "user.gguf.offset")), os.path.getsize(p))
        return out

    def assertEIO(self, fn, *args):
        with self.assertRaises(OSError) as cm:
            fn(*args)
        self.assertEqual(cm.exception.errno, errno.EIO, args)

    def test_truncated_while_mounted(self):
        with gm.Mount(self.model) as m:
            tensors = self.tensors(m)
            # nothing read yet: every read below reaches the daemon
            cut = len(self.orig) // 2
            os.truncate(self.model, cut)
            gone = ok = 0
            for name, (off, size) in tensors.items():
                raw = m.p("tensors", name)
                if off + size <= cut:
                    self.assertEqual(gm.read_file(raw), self.orig[off:off + size], name)
                    self.assertEqual(len(gm.read_file(raw + ".f32")), os.path.getsize(raw + ".f32"))
                    self.assertEqual(len(gm.read_file(raw + ".npy")), os.path.getsize(raw + ".npy"))
                    ok += 1
                    continue
                gone += 1
                self.assertEIO(gm.read_file, raw)
                self.assertEIO(gm.read_file, raw + ".f32")
                self.assertEIO(gm.read_file, raw + ".npy")
                # the .npy header is not in the file: still there
                self.assertEqual(gm.pread_direct(raw + ".npy", 6, 0), b"\x93NUMPY")
                if off < cut:
                    # cut through: what is left reads, what is gone does not
                    have = cut - off
                    self.assertEqual(gm.pread_direct(raw, have, 0), self.orig[off:cut], name)
                    self.assertEIO(gm.pread_direct, raw, 1, have)
                    self.assertEqual(len(gm.pread_direct(raw + ".f32", 4, 0)), 4)
            self.assertGreater(gone, 0)
            self.assertGreater(ok, 0)
            self.assertTrue(any(off < cut < off + size for off, size in tensors.values()))
            for key in os.listdir(m.p("metadata")):  # the header is all there
                gm.read_file(m.p("metadata", key))
            self.assertEqual(gm.read_file(m.p("metadata", "general.name")), b"tinyllama-test\n")
            self.assertEqual(json.loads(gm.read_file(m.p("gguf.json")))["file"], "model.gguf")
            self.assertIn(b"tinyllama-test", gm.read_file(m.p("summary.txt")))
            os.listdir(m.p("tensors"))
            self.assertIsNone(m.proc.poll(), "the daemon died")

            # cut inside the header: rendered files fail too, the daemon lives on
            os.truncate(self.model, 100)
            self.assertEIO(gm.pread_direct, m.p("metadata", "tokenizer.ggml.tokens"), 100, 0)
            self.assertEIO(gm.pread_direct, m.p("gguf.json"), 100, 0)
            self.assertEqual(sorted(os.listdir(m.path)),
                             ["gguf.json", "metadata", "model.gguf", "quants", "stats", "stats.tsv",
                              "summary.txt", "tensors"])
            self.assertIsNone(m.proc.poll(), "the daemon died")

            # the bytes come back (same file, rewritten): served again
            with open(self.model, "r+b") as f:
                f.write(self.orig)
            for name, (off, size) in tensors.items():
                self.assertEqual(gm.pread_direct(m.p("tensors", name), size, 0),
                                 self.orig[off:off + size], name)
            self.assertEqual(gm.read_file(m.p("metadata", "general.name")), b"tinyllama-test\n")

    def test_shrink_logged(self):
        """-o log=FILE: the shrink is said once, with both sizes, and the first EIO it
        caused with it; more EIOs are counted (the root's user.ggufs.eio_replies, and
        one summary line at unmount), and user.ggufs.last_error names it."""
        log = os.path.join(self.tmp, "ggufs.log")
        with gm.Mount(self.model, ["-o", "log=" + log]) as m:
            tensors = self.tensors(m)
            cut = len(self.orig) // 2
            os.truncate(self.model, cut)
            gone = [n for n, (off, size) in tensors.items() if off >= cut]
            for name in gone:
                self.assertEIO(gm.read_file, m.p("tensors", name))
            with open(log) as f:
                lines = f.read().splitlines()
            self.assertEqual(len(lines), 2, lines)
            for line in lines:
                self.assertRegex(line, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ggufs\[\d+\]: %s: "
                                 % re.escape(m.path))
            shrank = "%s: the file shrank from %d to %d bytes while mounted" % (
                self.model, len(self.orig), cut)
            self.assertIn(shrank, lines[0])
            self.assertIn("EIO to a read of tensors/", lines[1])
            self.assertIn("because " + shrank, lines[1])
            eio = int(os.getxattr(m.path, "user.ggufs.eio_replies"))
            self.assertGreaterEqual(eio, len(gone))
            self.assertIn(shrank, os.getxattr(m.path, "user.ggufs.last_error").decode())
            self.assertEqual(m.stderr(), "")
        with open(log) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 3, lines)
        self.assertRegex(lines[2], r"EIO to a read of .*\(again %d times in \d+ s\)$" % (eio - 1))
        self.assertEqual(os.stat(log).st_mode & 0o777, 0o600)

    def test_renamed_over_while_mounted(self):
        """Another GGUF renamed over the model's path: the daemon holds the file it
        opened and keeps serving it."""
        other = os.path.join(self.tmp, "other.gguf")
        shutil.copyfile(os.path.join(gm.VECTORS, "alltypes.gguf"), other)
        with gm.Mount(self.model) as m:
            tensors = self.tensors(m)
            names = sorted(os.listdir(m.p("tensors")))
            os.rename(other, self.model)
            self.assertNotEqual(gm.read_file(self.model)[:200], self.orig[:200])
            # read for the first time after the rename, and again bypassing the cache
            for name, (off, size) in tensors.items():
                want = hashlib.sha256(self.orig[off:off + size]).hexdigest()
                self.assertEqual(hashlib.sha256(gm.read_file(m.p("tensors", name))).hexdigest(),
                                 want, name)
                self.assertEqual(hashlib.sha256(gm.pread_direct(m.p("tensors", name), size, 0))
                                 .hexdigest(), want, name)
            f32 = gm.read_file(m.p("tensors", "output_norm.weight.f32"))
            off, size = tensors["output_norm.weight"]
            self.assertEqual(f32, self.orig[off:off + size])  # an f32 tensor: the same bytes
            self.assertEqual(gm.read_file(m.p("metadata", "general.name")), b"tinyllama-test\n")
            self.assertEqual(gm.read_file(m.p("metadata", "general.architecture")), b"llama\n")
            doc = json.loads(gm.read_file(m.p("gguf.json")))
            self.assertEqual(len(doc["tensors"]), len(tensors))
            self.assertEqual(sorted(os.listdir(m.p("tensors"))), names)


class Handwritten(unittest.TestCase):
    """Small GGUF files written here: escaped names, and a tensor of a type ggufs does
    not know (raw file only, sized to the next tensor, one warning line at mount)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ggufs-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_unknown_type(self):
        import struct
        model = os.path.join(self.tmp, "odd.gguf")
        f32 = struct.pack("<4f", 1.0, -2.5, 3.25, 0.0)
        offs = gm.write_gguf(model, [("general.architecture", "test")], [
            ("mystery", [4], 99, b"\xab" * 10),
            ("known", [4], gm.GGML_F32, f32),
            ("last.mystery", [8], 1000, b"\xcd" * 7),
        ])
        with gm.Mount(model) as m:
            names = sorted(os.listdir(m.p("tensors")))
            self.assertEqual(names, ["known", "known.f32", "known.npy", "last.mystery", "mystery"])
            # sized from its offset to the next tensor's data, or to the end of the file
            self.assertEqual(os.path.getsize(m.p("tensors", "mystery")), offs[1] - offs[0])
            self.assertEqual(gm.read_file(m.p("tensors", "mystery"))[:10], b"\xab" * 10)
            self.assertEqual(gm.read_file(m.p("tensors", "last.mystery")),
                             gm.read_file(model)[offs[2]:])
            self.assertEqual(gm.read_file(m.p("tensors", "known.f32")), f32)
            self.assertEqual(os.getxattr(m.p("tensors", "mystery"), "user.gguf.name"), b"mystery")
            err = m.stderr().splitlines()
        self.assertEqual(len(err), 2, err)
        for line, (name, t) in zip(err, [("mystery", 99), ("last.mystery", 1000)]):
            self.assertTrue(line.startswith("ggufs: " + model + ": warning: "), line)
            self.assertIn("'%s'" % name, line)
            self.assertIn(str(t), line)

    def test_names(self):
        import struct
        f32 = struct.pack("<2f", 1.0, 2.0)
        tensors = [b"a/b", b"x.f32", b"y.npy", b".", b"..", b"100%", b"caf\xc3\xa9"]
        keys = [b"k/ey", b".", b"%", b"tokenizer.ggml.pre"]
        model = os.path.join(self.tmp, "names.gguf")
        gm.write_gguf(model, [(k, "v") for k in keys],
                      [(n, [2], gm.GGML_F32, f32) for n in tensors])
        with gm.Mount(model) as m:
            want = set()
            for n in tensors:
                e = gm.escape_name(n, tensor=True)
                want |= {e, e + ".f32", e + ".npy"}
            self.assertEqual(set(os.listdir(m.p("tensors"))), want)
            self.assertEqual(set(os.listdir(m.p("metadata"))),
                             {gm.escape_name(k, tensor=False) for k in keys})
            self.assertIn("a%2Fb", want)
            self.assertIn("x%2Ef32.f32", want)
            self.assertIn("%2E%2E.npy", want)
            for n in tensors:
                path = m.p("tensors", gm.escape_name(n, tensor=True))
                self.assertEqual(os.getxattr(path, "user.gguf.name"), n)
                self.assertEqual(gm.read_file(path + ".f32"), f32)
            self.assertEqual(gm.read_file(m.p("metadata", "k%2Fey")), b"v\n")
            self.assertEqual(m.stderr(), "")

    def test_json_paths(self):
        """gguf.json names the files of every key and tensor, edge names included: each
        path exists and is that key's or tensor's file, and together they are every
        file of metadata/ and tensors/."""
        import struct
        f32 = struct.pack("<2f", 1.5, -2.0)
        tensors = [b"a/b", b"100%", b"x\x00y", b"w.f32", b"v.npy", b".", b"..", b"",
                   b"caf\xc3\xa9", b"L" * 250, b"L" * 250 + b".f32"]
        keys = [b"k/ey", b"p%", b"n\x00ul", b"x.f32", b".", b"..", b"", b"k" * 300]
        model = os.path.join(self.tmp, "paths.gguf")
        gm.write_gguf(model, [(k, "value %d" % i) for i, k in enumerate(keys)],
                      [(n, [2], gm.GGML_F32, f32) for n in tensors] +
                      [(b"mystery", [4], 99, b"\xab" * 16)])
        with gm.Mount(model) as m:
            doc = json.loads(gm.read_file(m.p("gguf.json")))
            named = set()
            for i, (key, entry) in enumerate(doc["metadata"].items()):
                self.assertEqual(key.encode(), keys[i])
                self.assertTrue(entry["file"].startswith("metadata/"), entry)
                self.assertEqual(gm.read_file(m.p(entry["file"])), b"value %d\n" % i, key)
                named.add(entry["file"])
            self.assertEqual(len(doc["tensors"]), len(tensors) + 1)
            for t in doc["tensors"]:
                name = t["name"].encode()
                with self.subTest(name=name):
                    raw = m.p(t["file"])
                    self.assertEqual(os.getxattr(raw, "user.gguf.name"), name)
                    named.add(t["file"])
                    if name == b"mystery":
                        self.assertIsNone(t["f32"])
                        self.assertIsNone(t["npy"])
                        self.assertEqual(gm.read_file(raw)[:16], b"\xab" * 16)
                        continue
                    self.assertEqual(gm.read_file(raw), f32)
                    self.assertEqual((t["f32"], t["npy"]), (t["file"] + ".f32", t["file"] + ".npy"))
                    self.assertEqual(gm.read_file(m.p(t["f32"])), f32)
                    self.assertEqual(os.getxattr(m.p(t["npy"]), "user.gguf.name"), name)
                    self.assertEqual(gm.read_file(m.p(t["npy"]))[-8:], f32)
                    named |= {t["f32"], t["npy"]}
            tree = {"metadata/" + f for f in os.listdir(m.p("metadata"))}
            tree |= {"tensors/" + f for f in os.listdir(m.p("tensors"))}
            self.assertEqual(named, tree)
            self.assertIn("tensors/x%00y.f32", named)
            self.assertIn("tensors/w%2Ef32.npy", named)
            self.assertIn("metadata/%", named)

    def write_split(self, count=3):
        """A model split like gguf-split does it: metadata in the first shard, split.*
        keys in every shard, two f32 tensors per shard. Returns {tensor: bytes}."""
        import struct
        want = {}
        for i in range(count):
            tensors = []
            for j in range(2):
                name = "blk.%d.w%d" % (i, j)
                data = struct.pack("<3f", i, j, i * 10 + j + 0.5)
                want[name] = data
                tensors.append((name, [3], gm.GGML_F32, data))
            kvs = [("general.architecture", "test")] if i == 0 else []
            kvs += [("split.no", i), ("split.count", count), ("split.tensors.count", 2 * count)]
            gm.write_gguf(os.path.join(self.tmp, "m-%05d-of-%05d.gguf" % (i + 1, count)),
                          kvs, tensors)
        return want

    def test_split_model(self):
        want = self.write_split()
        for shard in (1, 3):
            with self.subTest(given=shard):
                with gm.Mount(os.path.join(self.tmp, "m-%05d-of-00003.gguf" % shard)) as m:
                    files = set(os.listdir(m.p("tensors")))
                    self.assertEqual(files, {n + e for n in want for e in ("", ".f32", ".npy")})
                    for name, data in want.items():
                        self.assertEqual(gm.read_file(m.p("tensors", name)), data)
                        self.assertEqual(gm.read_file(m.p("tensors", name + ".f32")), data)
                    self.assertEqual(gm.read_file(m.p("metadata", "general.architecture")),
                                     b"test\n")
                    # which shard holds each tensor: xattr and gguf.json agree
                    doc = json.loads(gm.read_file(m.p("gguf.json")))
                    for t in doc["tensors"]:
                        shard = "m-%05d-of-00003.gguf" % (int(t["name"].split(".")[1]) + 1)
                        self.assertEqual(t["shard"], shard)
                        for f in (t["file"], t["f32"], t["npy"]):
                            self.assertEqual(os.getxattr(m.p(f), "user.gguf.shard"),
                                             shard.encode())
                    # summary.txt lists every shard with its size
                    summary = gm.read_file(m.p("summary.txt")).decode()
                    self.assertIn("\nshards:           3\n", summary)
                    for no in (1, 2, 3):
                        name = "m-%05d-of-00003.gguf" % no
                        size = os.path.getsize(os.path.join(self.tmp, name))
                        self.assertIn("\n  %s (%d bytes)\n" % (name, size), summary)

    def test_split_model_missing_shard(self):
        self.write_split()
        missing = os.path.join(self.tmp, "m-00002-of-00003.gguf")
        os.unlink(missing)
        mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(mnt)
        r = gm.run_ggufs([os.path.join(self.tmp, "m-00001-of-00003.gguf"), mnt])
        self.assertEqual(r.returncode, 1)
        lines = r.stderr.decode().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertTrue(lines[0].startswith("ggufs: " + missing), lines[0])
        self.assertFalse(gm.is_mounted(mnt))


if __name__ == "__main__":
    gm.main()
