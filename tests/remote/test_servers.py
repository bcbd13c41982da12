"""The test servers themselves, proven with Python's own HTTP client before ggufs uses
them: ranges, 206, ETag, If-Match, HEAD, the token, the redirect, https with the
generated CA file, and each fault switch. Needs no ggufs and no /dev/fuse.

Run: python3 test_servers.py (meson passes the ggufs binary too; it is ignored)."""
import http.client
import os
import socket
import ssl
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_server import Body, FaultServer, parse_range  # noqa: E402
from servers import Nginx  # noqa: E402

DATA = bytes(range(256)) * 4096 + b"tail"  # 1 MiB + 4, every byte position distinct mod 256


def poll(fn, timeout=5.0):
    """fn() once it is truthy, or its last value after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.02)


def request(url, method="GET", headers=None, timeout=10, context=None):
    """(status, headers, body) of one request with http.client: no redirect following,
    so that a test sees each answer as the server gave it."""
    u = urllib.request.urlparse(url)
    if u.scheme == "https":
        conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request(method, u.path + ("?" + u.query if u.query else ""), headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


class ParseRange(unittest.TestCase):
    def test_forms(self):
        self.assertEqual(parse_range("bytes=0-9", 100), (0, 10))
        self.assertEqual(parse_range("bytes=90-", 100), (90, 100))
        self.assertEqual(parse_range("bytes=90-1000", 100), (90, 100))
        self.assertEqual(parse_range("bytes=-10", 100), (90, 100))
        self.assertEqual(parse_range("bytes=100-", 100), "unsatisfiable")
        self.assertIsNone(parse_range("bytes=0-1,5-6", 100))
        self.assertIsNone(parse_range("bytes=5-1", 100))
        self.assertIsNone(parse_range("items=0-1", 100))
        self.assertIsNone(parse_range(None, 100))


class FaultServerTest(unittest.TestCase):
    def setUp(self):
        self.srv = FaultServer({"/d/m.gguf": DATA}).__enter__()
        self.url = self.srv.url + "/d/m.gguf"

    def tearDown(self):
        self.srv.__exit__(None, None, None)

    def test_whole_and_headers(self):
        status, h, body = request(self.url)
        self.assertEqual(status, 200)
        self.assertEqual(body, DATA)
        self.assertEqual(h["accept-ranges"], "bytes")
        self.assertTrue(h["etag"].startswith('"'))
        self.assertEqual(h["last-modified"], "Tue, 14 Nov 2023 22:13:20 GMT")
        rec = self.srv.log_settled(1)[-1]
        self.assertEqual((rec.method, rec.path, rec.status, rec.bytes_sent),
                         ("GET", "/d/m.gguf", 200, len(DATA)))

    def test_ranges(self):
        for i, (rng, start, end) in enumerate( (("bytes=5-300", 5, 301), ("bytes=1048570-", 1048570, len(DATA)),
                                ("bytes=-4", len(DATA) - 4, len(DATA)))):
            status, h, body = request(self.url, headers={"Range": rng})
            self.assertEqual(status, 206, rng)
            self.assertEqual(body, DATA[start:end], rng)
            self.assertEqual(h["content-range"], "bytes %d-%d/%d" % (start, end - 1, len(DATA)))
            self.assertEqual(int(h["content-length"]), end - start)
            self.assertEqual(self.srv.log_settled(i + 1)[i].range, rng)
        status, h, _ = request(self.url, headers={"Range": "bytes=%d-" % len(DATA)})
        self.assertEqual(status, 416)
        self.assertEqual(h["content-range"], "bytes */%d" % len(DATA))

    def test_ignore_if_match_and_shift_ranges(self):
        self.srv.ignore_if_match = True
        status, _, body = request(self.url, headers={"Range": "bytes=0-3", "If-Match": '"old"'})
        self.assertEqual((status, body), (206, DATA[:4]))
        self.srv.shift_ranges = 100
        status, h, body = request(self.url, headers={"Range": "bytes=0-3"})
        self.assertEqual((status, body, h["content-range"]),
                         (206, DATA[100:104], "bytes 100-103/%d" % len(DATA)))

    def test_head(self):
        status, h, body = request(self.url, "HEAD")
        self.assertEqual((status, body, int(h["content-length"])), (200, b"", len(DATA)))
        self.assertEqual(self.srv.log_settled(1)[-1].method, "HEAD")

    def test_if_match_and_swap(self):
        _, h, _ = request(self.url, "HEAD")
        etag = h["etag"]
        status, _, body = request(self.url, headers={"Range": "bytes=0-3", "If-Match": etag})
        self.assertEqual((status, body), (206, DATA[:4]))
        self.srv.swap("/d/m.gguf", b"X" * len(DATA))
        status, _, _ = request(self.url, headers={"Range": "bytes=0-3", "If-Match": etag})
        self.assertEqual(status, 412)
        status, h, body = request(self.url, headers={"Range": "bytes=0-3"})
        self.assertEqual((status, body), (206, b"XXXX"))
        self.assertNotEqual(h["etag"], etag)

    def test_404(self):
        self.assertEqual(request(self.srv.url + "/nope")[0], 404)

    def test_token(self):
        self.srv.token = "sekrit"
        status, h, _ = request(self.url)
        self.assertEqual(status, 401)
        self.assertIn("Bearer", h["www-authenticate"])
        self.assertEqual(request(self.url, headers={"Authorization": "Bearer wrong"})[0], 401)
        status, _, body = request(self.url, headers={"Authorization": "Bearer sekrit"})
        self.assertEqual((status, body), (200, DATA))
        self.assertEqual(self.srv.log_settled(3)[2].headers["authorization"], "Bearer sekrit")

    def test_redirect_to_another_host(self):
        with FaultServer({"/d/m.gguf": DATA}, host="127.0.0.2") as other:
            self.srv.redirect_to = other.url
            status, h, _ = request(self.url + "?sig=1")
            self.assertEqual(status, 302)
            self.assertEqual(h["location"], other.url + "/d/m.gguf?sig=1")
            status, _, body = request(h["location"], headers={"Range": "bytes=10-19"})
            self.assertEqual((status, body), (206, DATA[10:20]))
            self.assertEqual(other.log_settled(1)[0].path, "/d/m.gguf?sig=1")
            self.assertTrue(other.url.startswith("http://127.0.0.2:"))

    def test_expiring_signature(self):
        with FaultServer({"/d/m.gguf": DATA}, host="127.0.0.2") as cdn:
            cdn.require_signature = True
            self.srv.redirect_to = cdn.url
            self.srv.sign_redirects = 3600
            _, h, _ = request(self.url)
            self.assertRegex(h["location"], r"/d/m.gguf\?X-Expires=\d+$")
            self.assertEqual(request(h["location"], headers={"Range": "bytes=0-1"})[0], 206)
            self.assertEqual(request(cdn.url + "/d/m.gguf")[0], 403)
            cdn.revoked_before = time.time() + 7200  # what was handed out has expired
            self.assertEqual(request(h["location"], headers={"Range": "bytes=0-1"})[0], 403)
            self.srv.sign_redirects = 3 * 3600
            _, h, _ = request(self.url)
            self.assertEqual(request(h["location"], headers={"Range": "bytes=0-1"})[0], 206)
            self.srv.sign_redirects = -1  # handed out already expired
            _, h, _ = request(self.url + "?a=b")
            self.assertIn("?a=b&X-Expires=", h["location"])
            self.assertEqual(request(h["location"])[0], 403)

    def test_ignore_range(self):
        self.srv.ignore_range = True
        status, h, body = request(self.url, headers={"Range": "bytes=0-9"})
        self.assertEqual((status, len(body)), (200, len(DATA)))
        self.assertNotIn("content-range", h)

    def test_ignore_range_counts_bytes_actually_sent(self):
        """A client that stops reading a huge 200 body: the log shows far less sent."""
        size = 256 << 20
        self.srv.swap("/big", Body(b"GGUF", size))
        self.srv.ignore_range = True
        u = urllib.request.urlparse(self.srv.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("GET", "/big", headers={"Range": "bytes=0-99"})
        r = conn.getresponse()
        self.assertEqual(r.status, 200)
        self.assertEqual(r.read(4), b"GGUF")
        r.read(1 << 20)
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        rec = poll(lambda: [x for x in self.srv.log() if x.path == "/big"], timeout=30)
        self.assertTrue(rec, "the server never finished the request")
        self.assertLess(rec[0].bytes_sent, 64 << 20)
        self.assertGreaterEqual(rec[0].bytes_sent, 1 << 20)

    def test_fail_next(self):
        self.srv.fail_next(2, 503)
        got = [request(self.url, headers={"Range": "bytes=0-0"})[0] for _ in range(3)]
        self.assertEqual(got, [503, 503, 206])

    def test_clear_failures_and_hang_up(self):
        self.srv.fail_next(5, 429)
        self.assertEqual(request(self.url)[0], 429)
        self.srv.clear_failures()
        self.srv.hang_up = True
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionResetError)):
            request(self.url)
        self.srv.hang_up = False
        self.assertEqual(request(self.url)[0], 200)

    def test_retry_after_reset_next_truncate_next(self):
        self.srv.retry_after = "7"
        self.srv.fail_next(1, 429)
        status, headers, _ = request(self.url, headers={"Range": "bytes=0-0"})
        self.assertEqual((status, headers.get("retry-after")), (429, "7"))
        self.srv.truncate_next(1)
        u = urllib.request.urlparse(self.srv.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        try:
            conn.request("GET", "/d/m.gguf", headers={"Range": "bytes=0-99"})
            r = conn.getresponse()
            self.assertEqual(r.getheader("Content-Range"), "bytes 0-99/%d" % len(DATA))
            self.assertEqual(r.read(), DATA[:50])  # half, as Content-Length says
        finally:
            conn.close()
        self.srv.reset_next(1, after=10)
        with self.assertRaises((http.client.IncompleteRead, ConnectionResetError)):
            request(self.url, headers={"Range": "bytes=0-99"})
        self.assertEqual(request(self.url, headers={"Range": "bytes=0-99"})[2], DATA[:100])

    def test_max_in_flight(self):
        import threading
        self.srv.latency = 1.0
        threads = [threading.Thread(target=request, args=(self.url,)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        self.assertEqual(self.srv.max_in_flight, 3)
        self.srv.log_settled(3)  # all three ended at the server too
        self.srv.clear_log()
        request(self.url)
        self.assertEqual(self.srv.max_in_flight, 1)

    def test_keep_alive(self):
        u = urllib.request.urlparse(self.srv.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        try:
            conn.request("GET", "/d/m.gguf", headers={"Range": "bytes=0-9"})
            r = conn.getresponse()
            self.assertEqual(r.read(), DATA[:10])
            sock = conn.sock
            conn.request("GET", "/d/m.gguf", headers={"Range": "bytes=10-19"})
            r = conn.getresponse()
            self.assertEqual(r.read(), DATA[10:20])
            self.assertIs(conn.sock, sock)  # the same connection served both
        finally:
            conn.close()

    def test_stall_then_recover(self):
        self.srv.stall = True
        start = time.monotonic()
        with self.assertRaises((socket.timeout, TimeoutError)):
            request(self.url, timeout=0.5)
        self.assertLess(time.monotonic() - start, 5)
        self.srv.stall = False
        self.assertEqual(request(self.url, headers={"Range": "bytes=0-0"})[0], 206)

    def test_reset_after(self):
        self.srv.reset_after = 1000
        with self.assertRaises((http.client.IncompleteRead, ConnectionResetError)):
            request(self.url)
        rec = self.srv.log_settled(1)
        self.assertEqual(rec[-1].bytes_sent, 1000)

    def test_latency_and_rate(self):
        self.srv.latency = 0.2
        self.srv.rate = 1 << 20  # 1 MiB/s: a 256 KiB body takes at least 0.25 s
        start = time.monotonic()
        status, _, body = request(self.url, headers={"Range": "bytes=0-262143"})
        elapsed = time.monotonic() - start
        self.assertEqual((status, body), (206, DATA[:262144]))
        self.assertGreaterEqual(elapsed, 0.2 + 0.18)

    def test_no_validators(self):
        self.srv.send_validators = False
        status, h, body = request(self.url, headers={"Range": "bytes=0-1"})
        self.assertEqual((status, body), (206, DATA[:2]))
        self.assertNotIn("etag", h)
        self.assertNotIn("last-modified", h)

    def test_extra_headers(self):
        self.srv.extra_headers = [("X-Repo-Commit", "0123abcd")]
        self.assertEqual(request(self.url, "HEAD")[1]["x-repo-commit"], "0123abcd")


class NginxTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="ggufs-root-")
        os.makedirs(os.path.join(cls.root, "o", "r", "resolve", "main"))
        with open(os.path.join(cls.root, "o", "r", "resolve", "main", "m.gguf"), "wb") as f:
            f.write(DATA)

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.root)

    def test_http_ranges_and_log(self):
        with Nginx(self.root) as n:
            self.assertTrue(n.url.startswith("http://127.0.0.1:"))
            url = n.url + "/o/r/resolve/main/m.gguf"
            status, h, body = request(url, headers={"Range": "bytes=100-199"})
            self.assertEqual((status, body), (206, DATA[100:200]))
            self.assertEqual(h["content-range"], "bytes 100-199/%d" % len(DATA))
            self.assertIn("etag", h)
            self.assertIn("last-modified", h)
            status, _, body = request(url, headers={"Authorization": "Bearer x"})
            self.assertEqual((status, body), (200, DATA))
            self.assertEqual(request(n.url + "/missing")[0], 404)
            recs = n.records_settled(3)
            self.assertEqual(len(recs), 3)
            a, b, c = recs
            self.assertEqual((a.method, a.path, a.range, a.status, a.auth),
                             ("GET", "/o/r/resolve/main/m.gguf", "bytes=100-199", 206, False))
            self.assertGreater(a.bytes_sent, 100)
            self.assertEqual((b.status, b.auth, b.range), (200, True, None))
            self.assertGreater(b.bytes_sent, len(DATA))
            self.assertEqual(c.status, 404)
            n.clear_log()
            self.assertEqual(n.records(), [])
            port = n.port
        self.assertIsNone(n.proc, "the master was waited for")
        with self.assertRaises(ConnectionRefusedError):  # and nothing listens any more
            socket.create_connection(("127.0.0.1", port), timeout=5).close()

    def test_https_with_cafile(self):
        with Nginx(self.root, https=True) as n:
            self.assertTrue(n.url.startswith("https://127.0.0.1:"))
            ctx = ssl.create_default_context(cafile=n.cafile)
            url = n.url + "/o/r/resolve/main/m.gguf"
            status, _, body = request(url, headers={"Range": "bytes=0-15"}, context=ctx)
            self.assertEqual((status, body), (206, DATA[:16]))
            with urllib.request.urlopen(urllib.request.Request(url, headers={"Range": "bytes=1-2"}),
                                        context=ctx, timeout=10) as r:
                self.assertEqual(r.read(), DATA[1:3])
            with self.assertRaises(urllib.error.URLError) as cm:  # not trusted without it
                urllib.request.urlopen(url, context=ssl.create_default_context(), timeout=10)
            self.assertIsInstance(cm.exception.reason, ssl.SSLCertVerificationError)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        sys.argv.pop(1)  # the ggufs binary, which these tests do not need
    unittest.main(verbosity=2)
