#!/usr/bin/env python3
"""mount(8), umount(8) and fstab: `mount -t fuse.ggufs MODEL DIR` and an fstab line
`MODEL DIR fuse.ggufs ro,allow_other 0 0` work through mount.fuse3, which runs
`/bin/sh -c 'ggufs MODEL DIR -o OPTIONS'`.

mount(8) clears PATH before it runs a helper, so the shell finds ggufs on its default
path (/usr/local/sbin first), as an installed one would be. The script therefore runs
in its own mount namespace (it re-executes itself under `unshare --mount`), where the
built ggufs is bind-mounted over /usr/local/sbin; nothing outside sees either mount."""
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time

import ggufs_mount as gm

NS_MARK = "GGUFS_TEST_MOUNT_NS"
HELPER_DIR = "/usr/local/sbin"
PR_SET_CHILD_SUBREAPER = 36


def enter_namespace():
    """Re-executes this script in a private mount namespace, once."""
    if os.environ.get(NS_MARK) == "1":
        return
    env = dict(os.environ, **{NS_MARK: "1"})
    argv = ["unshare", "--mount", "--propagation", "private",
            sys.executable, os.path.abspath(__file__)] + sys.argv[1:]
    os.execvpe("unshare", argv, env)


def mountinfo(path):
    """(options, fstype, source, superoptions) of the topmost mount at path, or None."""
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ")
            fields, rfields = left.split(), right.split()
            if fields[4] == path:
                found = (fields[5].split(","), rfields[0], rfields[1], rfields[2].split(","))
    return found


def ggufs_pid(mountpoint):
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv[0].endswith(b"ggufs") and mountpoint.encode() in argv:
                pids.append(int(pid))
    return pids


class MountCommand(gm.ScratchCase):

    @classmethod
    def setUpClass(cls):
        assert os.environ.get(NS_MARK) == "1", "not in a private mount namespace"
        # the daemon (orphaned by ggufs's fork under mount.fuse3) becomes our child
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
        cls.bin = tempfile.mkdtemp(prefix="ggufs-bin-")
        os.symlink(gm.GGUFS, os.path.join(cls.bin, "ggufs"))
        subprocess.run(["mount", "--bind", cls.bin, HELPER_DIR], check=True)
        # the shell mount.fuse3 starts, without PATH, finds the built ggufs
        r = subprocess.run(["env", "-i", "/bin/sh", "-c", "command -v ggufs"],
                           capture_output=True, text=True)
        assert r.stdout.strip() == HELPER_DIR + "/ggufs", r

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["umount", HELPER_DIR], check=True)
        shutil.rmtree(cls.bin)

    def setUp(self):
        super().setUp()
        self.model = os.path.realpath(gm.TINY)
        self.env = dict(os.environ)
        log = os.path.join(self.tmp, "san")
        for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):  # the daemon's stderr is /dev/null
            self.env[var] = (self.env.get(var, "") + ":log_path=" + log).lstrip(":")

    def tearDown(self):
        for pid in ggufs_pid(self.mnt):  # only after a failure
            subprocess.run(["umount", "-l", self.mnt], stderr=subprocess.DEVNULL)
            os.kill(pid, 9)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        shutil.rmtree(self.tmp)

    def run_cmd(self, argv):
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=gm.MOUNT_TIMEOUT, env=self.env)

    def check_mounted(self, allow_other=False):
        info = mountinfo(self.mnt)
        self.assertIsNotNone(info, "not mounted")
        opts, fstype, source, superopts = info
        self.assertEqual(fstype, "fuse.ggufs")
        self.assertEqual(source, self.model)
        self.assertIn("ro", opts)   # whatever mount(8) passed
        # and nosuid,nodev, although mount(8) passes "suid,dev" (as /proc/mounts shows)
        self.assertIn("nosuid", opts)
        self.assertIn("nodev", opts)
        with open("/proc/mounts") as f:
            line = [l.split() for l in f if l.split()[1] == self.mnt][-1]
        self.assertTrue({"ro", "nosuid", "nodev"} <= set(line[3].split(",")), line)
        self.assertIn("default_permissions", superopts)
        self.assertEqual("allow_other" in superopts, allow_other, superopts)
        self.assertEqual(gm.read_file(os.path.join(self.mnt, "metadata", "general.name")),
                         b"tinyllama-test\n")
        with self.assertRaises(OSError) as cm:
            open(os.path.join(self.mnt, "new"), "w")
        self.assertEqual(cm.exception.errno, 30)  # EROFS

    def umount_and_wait(self):
        """umount(8); the daemon exits 0 with no sanitizer report."""
        pids = ggufs_pid(self.mnt)
        self.assertEqual(len(pids), 1, pids)
        r = self.run_cmd(["umount", self.mnt])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNone(mountinfo(self.mnt))
        deadline = time.monotonic() + 20
        while True:
            done, status = os.waitpid(pids[0], os.WNOHANG)
            if done:
                break
            self.assertLess(time.monotonic(), deadline, "the daemon did not exit")
            time.sleep(0.02)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        logs = [f for f in os.listdir(self.tmp) if f.startswith("san")]
        self.assertEqual(logs, [])

    def test_mount_t(self):
        """mount -t fuse.ggufs, which passes `-o rw,dev,suid`: mounted read-only, nosuid,
        nodev."""
        r = self.run_cmd(["mount", "-t", "fuse.ggufs", self.model, self.mnt])
        self.assertEqual((r.returncode, r.stderr), (0, gm.background_stderr()))
        self.check_mounted()
        self.umount_and_wait()

    def test_mount_t_options(self):
        r = self.run_cmd(["mount", "-t", "fuse.ggufs", "-o", "rw,suid,dev,exec,allow_other,max_read=65536",
                          self.model, self.mnt])
        self.assertEqual((r.returncode, r.stderr), (0, gm.background_stderr()))
        self.check_mounted(allow_other=True)
        self.umount_and_wait()

    def test_fstab(self):
        fstab = os.path.join(self.tmp, "fstab")
        lines = [
            ("ro,allow_other", True),
            ("defaults", False),                                 # "rw" to ggufs
            ("defaults,nofail,_netdev,x-systemd.automount", False),
            ("ro,noauto,nonempty", False),
        ]
        for opts, allow_other in lines:
            with self.subTest(options=opts):
                with open(fstab, "w") as f:
                    f.write("# a comment\n%s %s fuse.ggufs %s 0 0\n"
                            % (self.model.replace(" ", "\\040"), self.mnt.replace(" ", "\\040"),
                               opts))
                r = self.run_cmd(["mount", "--fstab", fstab, self.mnt])
                self.assertEqual((r.returncode, r.stderr), (0, gm.background_stderr()))
                self.check_mounted(allow_other)
                self.umount_and_wait()

    def test_refused(self):
        """ggufs's one line reaches the user through mount(8); nothing is mounted."""
        missing = os.path.join(self.tmp, "missing.gguf")
        r = self.run_cmd(["mount", "-t", "fuse.ggufs", missing, self.mnt])
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stderr, "ggufs: %s: No such file or directory\n" % missing)
        self.assertIsNone(mountinfo(self.mnt))
        # a second mount on a live one
        r = self.run_cmd(["mount", "-t", "fuse.ggufs", self.model, self.mnt])
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_cmd(["mount", "-t", "fuse.ggufs", self.model, self.mnt])
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("already mounted", r.stderr)
        self.umount_and_wait()


if __name__ == "__main__":
    if os.path.exists("/dev/fuse"):
        enter_namespace()
    gm.main()
