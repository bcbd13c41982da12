#!/usr/bin/env python3
"""Remote models refused at mount: exit status 1, exactly one `ggufs: ` line on stderr
naming the URL (never its credentials), nothing mounted, within a bounded time. For a
refused connection, 404 (on hf:// with the URL it became), 401 and 403 (the line names
HF_TOKEN only where it would be sent), a directory, a server that answers 200 to a Range
request (refused after reading little of a 256 MiB body, with the next step), a file
that is not GGUF or is cut short (the same words as for a local file), a header that
claims a terabyte, a redirect loop, and a missing shard."""
import os
import re
import shutil
import time
import unittest

from remote_common import (REFUSE_TIMEOUT, TINY, Body, FaultServer, Nginx, env_without_token,
                           gm, install, public_root, split_gguf)
from servers import free_port

BIG_BODY = 256 << 20


class Refused(gm.RefusedMountCase):
    @classmethod
    def setUpClass(cls):
        cls.root = public_root()
        install(TINY, cls.root, "tinyllama-q4km.gguf")
        cls.noise = os.path.join(cls.root, "noise.gguf")
        with open(cls.noise, "wb") as f:
            f.write(bytes((i * 7 + 3) & 0xFF for i in range(300000)))
        shard_dir = os.path.join(cls.root, "split")
        os.mkdir(shard_dir)
        shards = split_gguf(TINY, shard_dir, "tiny", 3)
        os.unlink(shards[1])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)

    def refused(self, url, shown=None, opts=(), env=None):
        """Runs ggufs on url; asserts the refusal and returns its one line, which must
        name shown (url by default)."""
        start = time.monotonic()
        r = gm.run_ggufs(list(opts) + [url, self.mnt], timeout=REFUSE_TIMEOUT + 10,
                         env=env if env is not None else env_without_token())
        elapsed = time.monotonic() - start
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 1, err)
        self.assertEqual(r.stdout, b"")
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, "exactly one line on stderr: %r" % err)
        self.assertTrue(lines[0].startswith("ggufs: "), lines[0])
        self.assertIn(shown or url, lines[0])
        self.assertLess(elapsed, REFUSE_TIMEOUT)
        self.assertFalse(gm.is_mounted(self.mnt))
        self.assertEqual(os.listdir(self.mnt), [])
        return lines[0]

    def test_connection_refused(self):
        url = "http://127.0.0.1:%d/m.gguf" % free_port()
        line = self.refused(url).lower()
        self.assertTrue("connect" in line or "refused" in line, line)

    def test_404(self):
        with Nginx(self.root) as n:
            line = self.refused(n.url + "/missing.gguf")
            self.assertTrue("404" in line or "not found" in line.lower(), line)

    def test_401_says_hf_token(self):
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s:
            s.token = "t0ken"
            line = self.refused(s.url + "/m.gguf", env=env_without_token(HF_ENDPOINT=s.url))
            self.assertIn("HF_TOKEN", line)
            self.assertTrue(all(r.status == 401 for r in s.log_settled(1)))

    def test_403_says_hf_token(self):
        """On the hub (HF_ENDPOINT's server) the hint names HF_TOKEN and token_file."""
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s:
            s.fail_next(1000, 403)
            line = self.refused(s.url + "/m.gguf", env=env_without_token(HF_ENDPOINT=s.url))
            self.assertIn("HF_TOKEN", line)
            self.assertIn("token_file", line)

    def test_403_elsewhere_says_only_token_file(self):
        """Elsewhere HF_TOKEN is never sent, so the hint names only what would be."""
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s:
            s.fail_next(1000, 403)
            line = self.refused(s.url + "/m.gguf")
            self.assertIn("403", line)
            self.assertIn("token_file", line)
            self.assertNotIn("HF_TOKEN", line)

    def test_404_on_hf_shows_the_url(self):
        """hf:// names the URL it became (a wrong HF_ENDPOINT or revision shows), without
        the endpoint's credentials."""
        with Nginx(self.root) as n:
            endpoint = n.url.replace("http://", "http://alice:s3cret-pw@")
            url = "hf://owner/repo@v2/sub/missing.gguf"
            line = self.refused(url, env=env_without_token(HF_ENDPOINT=endpoint))
            self.assertIn("404", line)
            self.assertIn(n.url + "/owner/repo/resolve/v2/sub/missing.gguf", line)
            self.assertNotIn("s3cret-pw", line)
            self.assertNotIn("alice", line)

    def test_directory_url(self):
        """nginx redirects .../split to .../split/ (and then forbids listing it): the
        line says the URL is not a file."""
        with Nginx(self.root) as n:
            line = self.refused(n.url + "/split")
            self.assertIn("not a file", line)
            self.assertIn("directory", line)

    def test_directory_listing_url(self):
        """A server that lists a folder (its index page, 200 whatever Range says): a URL
        ending in / is called not a file, not a server that ignores Range."""
        with FaultServer({"/models/": b"<html><a href=m.gguf>m.gguf</a></html>\n"}) as s:
            s.ignore_range = True
            # the query is no part of the path (nor of the URL shown)
            for url in (s.url + "/models/", s.url + "/models/?x=1"):
                line = self.refused(url, shown=s.url + "/models/")
                self.assertIn("not a file", line)
                self.assertIn("directory", line)
                self.assertNotIn("ignores Range", line)

    def test_401_with_a_wrong_token(self):
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s:
            s.token = "right"
            line = self.refused(s.url + "/m.gguf", env=env_without_token(HF_TOKEN="wrong-t0ken",
                                                                  HF_ENDPOINT=s.url))
            self.assertTrue("401" in line or "token" in line.lower(), line)
            self.assertNotIn("wrong-t0ken", line)

    def test_200_instead_of_206(self):
        body = Body(gm.read_file(TINY)[:1 << 20], BIG_BODY)
        with FaultServer({"/m.gguf": body}) as s:
            s.ignore_range = True
            line = self.refused(s.url + "/m.gguf")
            self.assertIn("range", line.lower())
            # use, not mount: --check and --diff say it too (issue 38 item 12)
            self.assertIn("download the file and use the local copy", line)
            recs = s.log_settled(1, timeout=30)
            self.assertTrue(recs and all(r.status == 200 for r in recs), recs)
            sent = sum(r.bytes_sent for r in recs)
            # socket buffers on loopback hold a few MB; a client that read the body
            # would have taken all 256 MiB
            self.assertLess(sent, 32 << 20, "the server sent %d bytes" % sent)
            print("200 to a Range request: %d request(s), %d of %d bytes sent"
                  % (len(recs), sent, BIG_BODY))

    def test_not_gguf(self):
        local = gm.run_ggufs([self.noise, self.mnt])
        local_line = local.stderr.decode().strip()
        self.assertTrue(local_line.startswith("ggufs: %s: " % self.noise), local_line)
        words = local_line[len("ggufs: %s: " % self.noise):]
        with Nginx(self.root) as n:
            url = n.url + "/noise.gguf"
            line = self.refused(url)
            self.assertTrue(line.endswith(": " + words), "%r ends like %r" % (line, words))

    def same_words_as_local(self, data, name):
        """Serves data as name and asserts the refusal says what a local file's does."""
        path = os.path.join(self.root, name)
        with open(path, "wb") as f:
            f.write(data)
        local = gm.run_ggufs([path, self.mnt])
        local_line = local.stderr.decode().strip()
        self.assertEqual(local.returncode, 1, local_line)
        prefix = "ggufs: %s: " % path
        self.assertTrue(local_line.startswith(prefix), local_line)
        with Nginx(self.root) as n:
            line = self.refused(n.url + "/" + name)
        self.assertTrue(line.endswith(": " + local_line[len(prefix):]),
                        "%r ends like %r" % (line, local_line))
        return line

    def test_truncated_header_same_words(self):
        self.same_words_as_local(gm.read_file(TINY)[:100000], "cut-header.gguf")

    def test_truncated_data_same_words(self):
        data = gm.read_file(TINY)
        self.same_words_as_local(data[:len(data) - 1], "cut-data.gguf")

    def test_huge_claim_fetches_little(self):
        """A header that claims a 1 TiB key in a 4 TiB file: refused at once, not
        fetched (nor allocated)."""
        import struct
        header = b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 40) + b"k" * 64
        with FaultServer({"/h.gguf": Body(header, 1 << 42)}) as s:
            self.refused(s.url + "/h.gguf")
            sent = sum(r.bytes_sent for r in s.log_settled(1))
            self.assertLess(sent, 64 << 20)

    def test_stalled_at_mount(self):
        """A server that accepts the connection and never answers: with -o timeout=2
        the mount gives up within the bound."""
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s:
            s.stall = True
            self.refused(s.url + "/m.gguf", opts=["-o", "timeout=2"])

    def test_redirect_loop(self):
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s:
            s.redirect_to = s.url + "/again"
            self.refused(s.url + "/m.gguf")

    def test_missing_shard(self):
        with Nginx(self.root) as n:
            url = n.url + "/split/tiny-00001-of-00003.gguf"
            line = self.refused(url, shown=n.url + "/split/")
            self.assertIn("tiny-00002-of-00003.gguf", line)

    def test_credentials_never_shown(self):
        with Nginx(self.root) as n:
            url = n.url.replace("http://", "http://alice:s3cret-pw@") + "/missing.gguf?sig=zz"
            line = self.refused(url, shown=n.url + "/missing.gguf")
            self.assertNotIn("s3cret-pw", line)
            self.assertNotIn("alice:", line)

    def test_tls_unverified(self):
        with Nginx(self.root, https=True) as n:
            line = self.refused(n.url + "/tinyllama-q4km.gguf").lower()
            self.assertTrue(any(w in line for w in ("certificate", "ssl", "tls", "verif")), line)


class MountWait(unittest.TestCase):
    """What a remote mount waits for, on a terminal: said after a few seconds, once per
    attempt, naming -o timeout; silence when nothing is slow, and when stderr is not a
    terminal (the other tests)."""

    def setUp(self):
        self.tmp = gm.public_tmpdir()
        self.mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(self.mnt)

    def tearDown(self):
        gm.unmount(self.mnt)
        shutil.rmtree(self.tmp)

    def run_on_tty(self, args, until=None, then=None, timeout=REFUSE_TIMEOUT, env=None):
        """Runs ggufs with stderr on a pseudo-terminal: (exit status, its lines, less
        the line of a background mount where nothing listens on /dev/log, which
        mount-syslog tests). When until (bytes) shows up, then() is called once."""
        import pty
        import select
        import subprocess
        leader, follower = pty.openpty()
        p = subprocess.Popen([gm.GGUFS] + args, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=follower,
                             env=env_without_token(**(env or {})))
        os.close(follower)
        out = b""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([leader], [], [], 0.2)
                if ready:
                    try:
                        chunk = os.read(leader, 4096)
                    except OSError:   # the daemon let go of the terminal
                        chunk = b""
                    if not chunk:
                        break
                    out += chunk
                    if until and until in out and then:
                        then()
                        then = None
                elif p.poll() is not None:
                    break
            rc = p.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            os.close(leader)
        lines = out.decode(errors="replace").replace("\r", "").splitlines()
        return rc, [l for l in lines if l + "\n" != gm.UNHEARD_LINE]

    def test_slow_server_said_once_then_mounted(self):
        """The server holds the first request: after a few seconds one line says that
        the mount waits and which -o timeout bounds it; the server lets go and the mount
        is made."""
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s:
            s.stall = True

            def unstall():
                s.stall = False
            url = s.url + "/m.gguf"
            start = time.monotonic()
            rc, lines = self.run_on_tty([url, self.mnt], until=b"waiting", then=unstall)
            self.assertEqual(rc, 0, lines)
            self.assertTrue(gm.is_mounted(self.mnt))
            self.assertRegex(lines[0], r"^ggufs: %s: waiting for the server: no answer after "
                             r"\d+ s \(attempt 1 of 5; -o timeout=30 " % re.escape(url))
            self.assertGreaterEqual(time.monotonic() - start, 3)
            # the held request may be dropped when the stall ends: then the retry that
            # follows is said too, as attempt 2, and nothing else
            self.assertLessEqual(len(lines), 2, lines)
            for line in lines[1:]:
                self.assertIn("trying again in", line)
                self.assertIn("(attempt 2 of 5;", line)

    def test_waiting_names_the_hf_name(self):
        """Waiting for the hub: the line names the model as the user gave it (hf://),
        not the URL it became."""
        with FaultServer({"/o/r/resolve/main/m.gguf": gm.read_file(TINY)}) as s:
            s.stall = True

            def unstall():
                s.stall = False
            rc, lines = self.run_on_tty(["hf://o/r/m.gguf", self.mnt], until=b"waiting",
                                        then=unstall, env={"HF_ENDPOINT": s.url})
            self.assertEqual(rc, 0, lines)
            self.assertRegex(lines[0], r"^ggufs: hf://o/r/m\.gguf: waiting for the server: "
                             r"no answer after \d+ s \(attempt 1 of 5;")

    def test_retries_said_and_final_words(self):
        """503 after 503, each with Retry-After: 2: the retries that come once the mount
        has waited a few seconds are said, once per attempt; the final line is ggufs's,
        with the attempts and the time."""
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s:
            s.retry_after = "2"
            s.fail_next(1000, 503)
            url = s.url + "/m.gguf"
            rc, lines = self.run_on_tty([url, self.mnt])
            self.assertEqual(rc, 1, lines)
            final = lines[-1]
            self.assertRegex(final, r"^ggufs: %s: HTTP 503 \(5 attempts in [\d.]+ s\)$"
                             % re.escape(url))
            waits = lines[:-1]
            self.assertGreaterEqual(len(waits), 1, lines)   # at 4, 6 and 8 s at least
            attempts = [int(re.search(r"\(attempt (\d) of 5;", l).group(1)) for l in waits]
            self.assertEqual(sorted(set(attempts)), attempts, "once per attempt: %r" % waits)
            for l in waits:
                self.assertIn(url + ": HTTP 503; trying again in 2.0 s", l)
                self.assertIn("-o timeout=30", l)

    def test_quick_recovery_is_silent(self):
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s:
            s.fail_next(1, 503)
            rc, lines = self.run_on_tty([s.url + "/m.gguf", self.mnt])
            self.assertEqual((rc, lines), (0, []))

    def test_timeout_in_ggufs_words(self):
        """A server that never answers, not on a terminal: the one line says so in
        ggufs's words (not libcurl's "Timeout was reached") and names -o timeout."""
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s:
            s.stall = True
            r = gm.run_ggufs(["-o", "timeout=1", s.url + "/m.gguf", self.mnt],
                             timeout=REFUSE_TIMEOUT, env=env_without_token())
            s.stall = False
            line = r.stderr.decode()
            self.assertEqual(r.returncode, 1, line)
            self.assertNotIn("Timeout was reached", line)
            self.assertIn("no answer from the server in time", line)
            self.assertIn("-o timeout=1", line)
            # the connection's bound that applied, not the 10 s of the default
            self.assertIn("at most 1 s to connect", line)


if __name__ == "__main__":
    gm.main()
