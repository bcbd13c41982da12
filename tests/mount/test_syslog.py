#!/usr/bin/env python3
"""In the background the daemon logs to syslog: ident ggufs, the mount point in each
line; where nothing listens on /dev/log, the mount says so on stderr in one line naming
-o log=FILE (not with that option, nor with -f). The test runs in a private mount namespace (unshare -m) with a /dev of its own,
where it binds /dev/log itself and reads what the daemon sends there: the host's /dev
and syslog are not touched. The event is a local model that shrinks under the mount:
one line says so, one the first EIO it caused."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import ggufs_mount as gm

INSIDE = "--inside-namespace"


def unheard(ggufs, model):
    """In the namespace, before /dev/log is there: a mount in the background says on
    stderr, in one line, that its events would be lost and which option keeps them
    (issue 38 item 6); with that option, or -f, it says nothing."""
    gm.GGUFS = ggufs
    tmp = tempfile.mkdtemp(prefix="ggufs-unheard-")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    try:
        for opts, want in (([], gm.UNHEARD_LINE),
                           (["-o", "log=" + os.path.join(tmp, "log")], "")):
            r = subprocess.run([ggufs] + opts + [model, mnt], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=gm.MOUNT_TIMEOUT)
            assert r.returncode == 0 and r.stderr == want, r
            assert gm.is_mounted(mnt)
            subprocess.run(["fusermount3", "-u", mnt], check=True)
            deadline = time.monotonic() + 10
            while gm.is_mounted(mnt) and time.monotonic() < deadline:
                time.sleep(0.05)
        with gm.Mount(model, mountpoint=mnt) as m:   # -f: nothing (said before serving)
            assert m.stderr() == "", m.stderr()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def inside(ggufs, model):
    """In the namespace: a /dev with null, fuse and our /dev/log; ggufs in daemon mode;
    the model cut; a read; the lines syslog got, printed one per line of stdout."""
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/dev"], check=True)
    os.mknod("/dev/null", 0o666 | 0o020000, os.makedev(1, 3))
    os.mknod("/dev/fuse", 0o600 | 0o020000, os.makedev(10, 229))
    unheard(ggufs, model)
    log = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    log.bind("/dev/log")
    log.settimeout(10)
    tmp = tempfile.mkdtemp(prefix="ggufs-syslog-")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    r = subprocess.run([ggufs, model, mnt], stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=gm.MOUNT_TIMEOUT)
    assert r.returncode == 0 and r.stderr == b"", r
    try:
        size = os.path.getsize(model)
        os.truncate(model, size // 2)
        names = os.listdir(os.path.join(mnt, "tensors"))
        eio = 0
        for name in names:
            try:
                with open(os.path.join(mnt, "tensors", name), "rb") as f:
                    f.read()
            except OSError:
                eio += 1
        assert eio > 0
        lines = []
        deadline = time.monotonic() + 10
        while len(lines) < 2 and time.monotonic() < deadline:
            lines.append(log.recv(4096).decode(errors="replace"))
        print(mnt)
        for line in lines:
            print(line)
    finally:
        subprocess.run(["fusermount3", "-u", mnt], check=False)
        deadline = time.monotonic() + 10
        while gm.is_mounted(mnt) and time.monotonic() < deadline:
            time.sleep(0.05)
        shutil.rmtree(tmp, ignore_errors=True)


class Syslog(unittest.TestCase):
    def test_background_logs_to_syslog(self):
        if not shutil.which("unshare") or subprocess.run(
                ["unshare", "--mount", "true"], capture_output=True).returncode != 0:
            self.skipTest("no private mount namespace to be had here")
        tmp = tempfile.mkdtemp(prefix="ggufs-test-")
        try:
            model = os.path.join(tmp, "model.gguf")
            shutil.copy(gm.TINY, model)
            r = subprocess.run(["unshare", "--mount", "--propagation", "private",
                                sys.executable, os.path.abspath(__file__), INSIDE, gm.GGUFS,
                                model], stdin=subprocess.DEVNULL, capture_output=True,
                               text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            out = r.stdout.splitlines()
            mnt, lines = out[0], out[1:]
            self.assertEqual(len(lines), 2, r.stdout)
            for line in lines:
                # <PRI>TIMESTAMP ggufs[PID]: MOUNTPOINT: ...
                self.assertRegex(line, r"^<\d+>.* ggufs\[\d+\]: %s: " % mnt.replace(".", r"\."))
            self.assertIn("%s: the file shrank from %d to %d bytes while mounted"
                          % (model, os.path.getsize(gm.TINY), os.path.getsize(gm.TINY) // 2),
                          lines[0])
            self.assertIn("EIO to a read of tensors/", lines[1])
            self.assertTrue(lines[0].startswith("<27>"), "LOG_DAEMON | LOG_ERR: " + lines[0])
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == INSIDE:
        inside(sys.argv[2], sys.argv[3])
    else:
        gm.main()
