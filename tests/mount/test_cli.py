#!/usr/bin/env python3
"""The command line: refused models and bad arguments (one line, exit status, nothing
mounted), --help and --version, daemon mode, signals, and a model that shrinks under
the mount."""
import errno
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import ggufs_mount as gm


def ggufs_processes(mountpoint):
    """PIDs of ggufs daemons whose command line names mountpoint."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"ggufs") and mountpoint.encode() in argv:
            pids.append(int(pid))
    return pids


class Refused(unittest.TestCase):
    """Whatever is wrong, ggufs says so in one line and mounts nothing."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ggufs-test-")
        self.mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(self.mnt)

    def tearDown(self):
        if gm.is_mounted(self.mnt):
            gm.unmount(self.mnt)
            self.fail("something was mounted")
        shutil.rmtree(self.tmp)

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

    def test_truncated_models(self):
        size = os.path.getsize(gm.TINY)
        for n in [3, 4, 8, 23, 24, 100, 5000, 170000, size // 2, size - 1]:
            with self.subTest(bytes=n):
                path = self.model_copy(n)
                line = self.refused([path, self.mnt], contains=path + ": ")

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
        if os.geteuid() == 0:
            self.skipTest("root reads everything")
        path = self.model_copy()
        os.chmod(path, 0)
        self.refused([path, self.mnt], contains=path)

    def test_missing_mountpoint(self):
        mnt = os.path.join(self.tmp, "nowhere")
        self.refused([gm.TINY, mnt], contains=mnt)
        self.assertFalse(os.path.exists(mnt))

    def test_mountpoint_is_a_file(self):
        path = self.model_copy()
        self.refused([gm.TINY, path], contains=path)

    def test_bad_model_and_bad_mountpoint(self):
        # one line, whichever is reported
        self.refused([os.path.join(self.tmp, "missing.gguf"), os.path.join(self.tmp, "nowhere")])

    def test_usage(self):
        self.refused([], status=2, contains="usage")
        self.refused([gm.TINY], status=2, contains="usage")
        self.refused([gm.TINY, self.mnt, self.mnt], status=2, contains="usage")

    def test_unknown_option(self):
        r = gm.run_ggufs(["-o", "no_such_option", gm.TINY, self.mnt])
        self.assertEqual(r.returncode, 1)
        self.assertEqual(len(r.stderr.decode().splitlines()), 1, r.stderr)
        self.assertFalse(gm.is_mounted(self.mnt))


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
            out = r.stdout.decode()
            self.assertIn("MODEL.gguf MOUNTPOINT", out)
            for word in ["-f", "-d", "-o", "allow_other"]:
                self.assertIn(word, out)


class Daemon(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ggufs-test-")
        self.mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(self.mnt)

    def tearDown(self):
        if gm.is_mounted(self.mnt):
            gm.unmount(self.mnt)
        shutil.rmtree(self.tmp)

    def wait_gone(self, timeout=20):
        deadline = time.monotonic() + timeout
        while ggufs_processes(self.mnt):
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
        self.assertEqual(r.stderr, b"")
        self.assertTrue(gm.is_mounted(self.mnt), "mounted when ggufs returns")
        self.assertEqual(gm.read_file(os.path.join(self.mnt, "metadata", "general.name")),
                         b"tinyllama-test\n")
        self.assertTrue(ggufs_processes(self.mnt))
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
            pids = ggufs_processes(rel)
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
            deadline = time.monotonic() + gm.MOUNT_TIMEOUT
            while not gm.is_mounted(self.mnt):
                self.assertIsNone(p.poll())
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.02)
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


class Shrunk(unittest.TestCase):
    """The model file is truncated under the mount: reads of the bytes that are gone
    fail with EIO, everything else is still served, the daemon survives."""

    def test_truncated_while_mounted(self):
        tmp = tempfile.mkdtemp(prefix="ggufs-test-")
        try:
            model = os.path.join(tmp, "model.gguf")
            shutil.copyfile(gm.TINY, model)
            size = os.path.getsize(model)
            with gm.Mount(model) as m:
                names = sorted(os.listdir(m.p("tensors")))
                os.truncate(model, size // 2)
                gone = ok = 0
                for name in names:
                    try:
                        gm.read_file(m.p("tensors", name))
                        ok += 1
                    except OSError as e:
                        self.assertEqual(e.errno, errno.EIO, name)
                        gone += 1
                self.assertGreater(gone, 0)
                self.assertGreater(ok, 0)
                self.assertEqual(gm.read_file(m.p("metadata", "general.name")), b"tinyllama-test\n")
                os.listdir(m.p("tensors"))
        finally:
            shutil.rmtree(tmp)


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
