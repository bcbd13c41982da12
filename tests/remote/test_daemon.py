#!/usr/bin/env python3
"""A remote mount in daemon mode (no -f), as fstab and mount(8) run it: whatever the
fetcher set up before fuse_daemonize's fork still works after it. With -o token_file,
the data is right, the token reaches the server, a sequential reader still gets
requests in flight (its read-ahead threads live in the daemon), and the daemon exits 0
after fusermount3 -u. The daemon, orphaned by the fork, is waited for as this process
is made a child subreaper (and killed if it does not end); under ASan its reports go
to a log file (log_path)."""
import ctypes
import glob
import os
import shutil
import time
import unittest

from remote_common import TINY, FaultServer, env_without_token, gm, read_sequentially

PR_SET_CHILD_SUBREAPER = 36
TOKEN = "hf_daemon_T0ken"
PATH = "/o/r/resolve/main/tinyllama-q4km.gguf"


def wait_pid(pid, timeout):
    """The exit code of child pid once it ends within timeout, else None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    return None


class Daemon(unittest.TestCase):
    def test_daemon_mode(self):
        libc = ctypes.CDLL(None, use_errno=True)
        self.assertEqual(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0)
        tmp = gm.public_tmpdir()
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        token_file = os.path.join(tmp, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(token_file, 0o600)   # a token file others can read is refused
        asan_log = os.path.join(tmp, "asan")
        env = env_without_token()
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":log_path=" + asan_log
        data = gm.read_file(TINY)
        try:
            with FaultServer({PATH: data}) as s:
                s.token = TOKEN
                url = s.url + PATH
                r = gm.run_ggufs(["-o", "token_file=" + token_file, url, mnt], env=env)
                self.assertEqual((r.returncode, r.stderr.decode()), (0, gm.background_stderr()))
                self.assertTrue(gm.is_mounted(mnt))
                daemons = gm.ggufs_processes(mnt)
                self.assertEqual(len(daemons), 1)
                daemon = daemons[0]
                try:
                    with gm.Mount(TINY) as local:
                        s.latency = 0.2
                        s.clear_log()
                        got = read_sequentially(os.path.join(mnt, "tensors", "output.weight"))
                        self.assertEqual(got, gm.read_file(local.p("tensors", "output.weight")))
                        in_flight = s.max_in_flight
                        s.latency = 0
                        for name in ("blk.0.attn_q.weight.f32", "token_embd.weight.npy"):
                            self.assertEqual(gm.read_file(os.path.join(mnt, "tensors", name)),
                                             gm.read_file(local.p("tensors", name)), name)
                    self.assertTrue(all(x.headers.get("authorization") == "Bearer " + TOKEN
                                        for x in s.log()))
                finally:
                    gm.unmount(mnt)
                    code = wait_pid(daemon, 20)
                    if code is None:
                        os.kill(daemon, 9)
                        os.waitpid(daemon, 0)
                problems = []
                if in_flight < 2:
                    problems.append("a sequential reader had %d request in flight at most: "
                                    "no read-ahead after the fork" % in_flight)
                if code is None:
                    problems.append("the daemon did not end within 20 s of the unmount")
                elif code != 0:
                    problems.append("the daemon exited %d after the unmount" % code)
                self.assertEqual(problems, [])
            reports = glob.glob(asan_log + "*")
            self.assertEqual(reports, [], "sanitizer reports: %s" %
                             "".join(open(p).read() for p in reports))
        finally:
            if gm.is_mounted(mnt):
                gm.unmount(mnt)
            shutil.rmtree(tmp)


if __name__ == "__main__":
    gm.main()
