#!/usr/bin/env python3
"""Where the token goes: HF_TOKEN reaches the hub (an hf:// URL, or a URL on
HF_ENDPOINT's server) and no other server; -o token_file=PATH (its trailing newline
stripped) reaches the URL's own server. Either goes as `Authorization: Bearer TOKEN`,
never to the host
a redirect leads to (a 302 from 127.0.0.1 to 127.0.0.2, whose log never shows an
Authorization header, while the data still comes through right), and never appears in
/proc/mounts, the fsname or the daemon's -d output. A URL's user:password@ is never
shown in /proc/mounts either."""
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from remote_common import (TinyCase, TINY, EnvMount, FaultServer, compare_mounts, env_without_token,
                           gm, proc_mounts_line)

TOKEN = "hf_T0kenThatMustNotLeak"
PATH = "/o/r/resolve/main/tinyllama-q4km.gguf"


class Token(TinyCase):
    def read_some_tensors(self, m):
        """Reads two raw tensors through m and checks them against the file."""
        for name in ("output.weight", "blk.1.ffn_down.weight"):
            a, _ = self.extents[name]
            got = gm.read_file(m.p("tensors", name))
            self.assertEqual(got, self.data[a:a + len(got)], name)
            self.assertGreater(len(got), 0)

    def assert_not_shown(self, m, secret, url):
        line = proc_mounts_line(m.path)
        self.assertIsNotNone(line)
        self.assertNotIn(secret, line)
        self.assertEqual(line.split()[0], url)
        with open("/proc/self/mountinfo") as f:
            self.assertNotIn(secret, f.read())
        self.assertNotIn(secret, m.stderr())

    def test_hf_token_is_sent_as_bearer(self):
        with FaultServer({PATH: self.data}) as s:
            s.token = TOKEN
            url = s.url + PATH
            with EnvMount(url, ["-d"], env_without_token(HF_TOKEN=TOKEN, HF_ENDPOINT=s.url)) as m:
                self.read_some_tensors(m)
                self.assert_not_shown(m, TOKEN, url)
            log = s.log_settled(2)
            self.assertTrue(log)
            for r in log:
                self.assertEqual(r.headers.get("authorization"), "Bearer " + TOKEN, r)
                self.assertIn(r.status, (200, 206))

    def test_hf_token_stays_with_the_hub(self):
        """HF_TOKEN set in the shell never goes to a server that is not the hub: the
        mount of another server's URL sends no Authorization, and where that server
        wants a token, the refusal says how to give it one."""
        with FaultServer({PATH: self.data}) as s, FaultServer({}, host="127.0.0.2") as hub:
            url = s.url + PATH
            env = env_without_token(HF_TOKEN=TOKEN, HF_ENDPOINT=hub.url)
            with EnvMount(url, (), env) as m:
                self.read_some_tensors(m)
            log = s.log_settled(2)
            self.assertTrue(log)
            for r in log:
                self.assertNotIn("authorization", r.headers, r)
            self.assertEqual(hub.log(), [])
            s.token = TOKEN
            mnt = tempfile.mkdtemp(prefix="ggufs-test-")
            try:
                r = gm.run_ggufs([url, mnt], env=env)
            finally:
                os.rmdir(mnt)
            err = r.stderr.decode()
            self.assertEqual(r.returncode, 1, err)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertIn("token_file", err)
            self.assertNotIn(TOKEN, err)
            for r in s.log_settled(3):
                self.assertNotIn("authorization", r.headers, r)

    def test_hf_endpoint_with_token(self):
        with FaultServer({PATH: self.data}) as s:
            s.token = TOKEN
            url = "hf://o/r/tinyllama-q4km.gguf"
            with EnvMount(url, (), env_without_token(HF_TOKEN=TOKEN, HF_ENDPOINT=s.url)) as m:
                self.read_some_tensors(m)
                self.assert_not_shown(m, TOKEN, url)
            self.assertTrue(all(r.headers.get("authorization") == "Bearer " + TOKEN
                                for r in s.log_settled(2)))

    def test_redirect_to_another_host_gets_no_token(self):
        with FaultServer({}) as first, FaultServer({PATH: self.data}, host="127.0.0.2") as cdn:
            first.token = TOKEN
            first.redirect_to = cdn.url
            url = first.url + PATH
            with EnvMount(url, (), env_without_token(HF_TOKEN=TOKEN, HF_ENDPOINT=first.url)) as m, \
                    gm.Mount(TINY) as local:
                compare_mounts(self, local.path, m.path, "tinyllama-q4km.gguf", [url])
                self.assert_not_shown(m, TOKEN, url)
            first_log, cdn_log = first.log_settled(1), cdn.log_settled(2)
            self.assertTrue(all(r.status == 302 for r in first_log), first_log)
            self.assertTrue(all(r.headers.get("authorization") == "Bearer " + TOKEN
                                for r in first_log))
            self.assertGreaterEqual(len(cdn_log), 2, "the data came from the other host")
            for r in cdn_log:
                self.assertNotIn("authorization", r.headers, r)
                self.assertIn(r.status, (200, 206))

    def test_redirect_gets_no_url_credentials(self):
        """The user:password of a URL is not sent to the host a redirect leads to."""
        with FaultServer({}) as first, FaultServer({PATH: self.data}, host="127.0.0.2") as cdn:
            first.redirect_to = cdn.url
            url = first.url.replace("http://", "http://alice:pa55-w0rd@") + PATH
            with EnvMount(url) as m:
                self.read_some_tensors(m)
                self.assert_not_shown(m, "pa55-w0rd", first.url + PATH)
            cdn_log = cdn.log_settled(1)
            self.assertTrue(cdn_log)
            for r in cdn_log:
                self.assertNotIn("authorization", r.headers, r)

    def test_expired_signed_redirect(self):
        """The hub's redirect carries a signed URL that expires: once the CDN refuses
        it, reads still come through (ggufs asks the URL as given again), right."""
        with FaultServer({}) as first, FaultServer({PATH: self.data}, host="127.0.0.2") as cdn:
            first.token = TOKEN
            first.redirect_to = cdn.url
            first.sign_redirects = 600
            cdn.require_signature = True
            url = first.url + PATH
            with EnvMount(url, (), env_without_token(HF_TOKEN=TOKEN, HF_ENDPOINT=first.url)) as m:
                a, _ = self.extents["output.weight"]
                got = gm.read_file(m.p("tensors", "output.weight"))
                self.assertEqual(got, self.data[a:a + len(got)])
                cdn.revoked_before = time.time() + 1200  # every URL handed out expired
                first.sign_redirects = 3600
                a, _ = self.extents["blk.1.ffn_down.weight"]
                got = gm.read_file(m.p("tensors", "blk.1.ffn_down.weight"))
                self.assertEqual(got, self.data[a:a + len(got)])
            self.assertFalse(any("authorization" in r.headers for r in cdn.log()))
            print("redirects %d, CDN answers %r" % (len(first.log()),
                                                     sorted(r.status for r in cdn.log())))

    def test_token_file(self):
        tmp = gm.public_tmpdir()
        try:
            token_file = os.path.join(tmp, "token")
            with open(token_file, "w") as f:
                f.write(TOKEN + "\n")
            os.chmod(token_file, 0o600)
            with FaultServer({PATH: self.data}) as s:
                s.token = TOKEN
                url = s.url + PATH
                with EnvMount(url, ["-d", "-o", "token_file=" + token_file]) as m:
                    self.read_some_tensors(m)
                    self.assert_not_shown(m, TOKEN, url)
                self.assertTrue(all(r.headers.get("authorization") == "Bearer " + TOKEN
                                    for r in s.log_settled(2)))
        finally:
            shutil.rmtree(tmp)

    def test_token_cannot_inject_headers(self):
        """A token with CR LF in it (a pasted token, a file with two lines) is refused
        or sent as one header; it never adds headers of its own to a request."""
        bad = TOKEN + "\r\nX-Injected: yes"
        with FaultServer({PATH: self.data}) as s:
            tmp = gm.public_tmpdir()
            mnt = os.path.join(tmp, "mnt")
            os.mkdir(mnt)
            proc = subprocess.Popen([gm.GGUFS, "-f", s.url + PATH, mnt], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=env_without_token(HF_TOKEN=bad, HF_ENDPOINT=s.url))
            try:
                deadline = time.monotonic() + gm.MOUNT_TIMEOUT
                while not gm.is_mounted(mnt) and proc.poll() is None:
                    self.assertLess(time.monotonic(), deadline, "neither mounted nor refused")
                    time.sleep(0.02)
                mounted = gm.is_mounted(mnt)
                if mounted:  # taken as one header value: then it must stay one
                    gm.read_file(os.path.join(mnt, "tensors", "output.weight"))
                    gm.unmount(mnt)
                _, err = proc.communicate(timeout=gm.MOUNT_TIMEOUT)
                if proc.returncode != 0:  # refused: one line, without the token
                    self.assertEqual(proc.returncode, 1)
                    lines = err.decode().splitlines()
                    self.assertEqual(len(lines), 1, lines)
                    self.assertNotIn(TOKEN, lines[0])
            finally:
                if gm.is_mounted(mnt):
                    gm.unmount(mnt)
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                shutil.rmtree(tmp)
            for rec in s.log_settled(1 if mounted else 0):
                self.assertNotIn("x-injected", rec.headers, "the token added a header")

    def test_no_token_no_header(self):
        with FaultServer({PATH: self.data}) as s:
            with EnvMount(s.url + PATH) as m:
                self.read_some_tensors(m)
                # ls -l times come from Last-Modified
                self.assertEqual(os.stat(m.p("tensors", "output.weight")).st_mtime, s.mtime)
            for r in s.log_settled(2):
                self.assertNotIn("authorization", r.headers, r)

    def test_user_password_never_shown(self):
        with FaultServer({PATH: self.data}) as s:
            url = s.url.replace("http://", "http://alice:pa55-w0rd@") + PATH + "?X-Sig=abc123"
            with EnvMount(url, ["-d"]) as m:
                self.read_some_tensors(m)
                self.assert_not_shown(m, "pa55-w0rd", s.url + PATH)
                self.assertNotIn("alice", proc_mounts_line(m.path))
                self.assertNotIn("X-Sig", proc_mounts_line(m.path))
            self.assertTrue(all(r.path == PATH + "?X-Sig=abc123" for r in s.log_settled(2)),
                            "the query string still goes to the server")


if __name__ == "__main__":
    gm.main()
