"""The fault server of the remote-mount tests: a threaded HTTP/1.1 server written here,
on loopback, a context manager that stops it on exit.

- FaultServer(files, host='127.0.0.1'): its own Range handling and switches that a test
  flips while a mount is live: require a token, redirect, ignore Range, swap a file,
  fail the next N requests, stall, add latency, limit the rate per connection, reset a
  connection after N bytes. With s.s3 = S3Auth(...) (s3auth.py) it speaks S3: every
  request's Signature V4 checked by botocore, objects addressed path style or
  virtual-hosted, errors as S3's XML.
"""
import collections
import email.utils
import hashlib
import http.server
import shutil
import socket
import socketserver
import struct
import tempfile
import threading
import time

from servers import STOP_TIMEOUT, make_cert, settled


class Body:
    """A large body that is not held in memory: prefix, then zeros up to size. For a
    server that sends far more than the client should read."""

    def __init__(self, prefix, size):
        self.prefix = bytes(prefix)
        self.size = size

    def __len__(self):
        return self.size

    def slice(self, start, end):
        """Bytes [start, end) of the body."""
        out = self.prefix[start:end] if start < len(self.prefix) else b""
        return out + b"\0" * (end - start - len(out))

    def fingerprint(self):
        """A hex digest that changes when prefix or size do (for the ETag)."""
        return hashlib.sha1(self.prefix + struct.pack("<Q", self.size)).hexdigest()


class ServedFile:
    """One file of a FaultServer: its content (bytes or Body), ETag and Last-Modified."""

    def __init__(self, content, mtime, version, headers=()):
        self.content = content
        self.mtime = mtime
        self.headers = list(headers)  # sent with this file alone (a hub page's Link)
        fp = (content.fingerprint() if isinstance(content, Body)
              else hashlib.sha1(content).hexdigest())
        if not isinstance(content, Body):  # slices of it are then views, never copies
            self.content = memoryview(bytes(content))
        self.etag = '"%s-%d"' % (fp[:16], version)

    def slice(self, start, end):
        """Bytes [start, end) of the content."""
        if isinstance(self.content, Body):
            return self.content.slice(start, end)
        return self.content[start:end]


class Encoded:
    """Bytes [start, end) of a ServedFile gzip'ed, then padded with zeros (or cut) to
    end - start bytes: a body that only its Content-Encoding tells from the file's."""

    def __init__(self, f, start, end):
        import gzip
        z = gzip.compress(bytes(f.slice(start, end)), mtime=0)
        self.start = start
        self.body = (z + b"\0" * (end - start))[:end - start]

    def slice(self, a, b):
        """Bytes [a, b) of the file's offsets, encoded."""
        return self.body[a - self.start:b - self.start]


# One request at the fault server. headers: {lower-case name: value}; range: the Range
# header or None; bytes_sent: body bytes written before the response ended or broke.
FaultRecord = collections.namedtuple("FaultRecord", "method path headers range status bytes_sent")


def parse_range(header, size):
    """A single-range Range header against a file of size bytes: (start, end) with end
    exclusive, 'unsatisfiable', or None when the header is absent or not one byte range
    we handle (the whole file is then sent, as RFC 9110 allows)."""
    if header is None:
        return None
    unit, _, spec = header.strip().partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    if not dash:
        return None
    first, last = first.strip(), last.strip()
    if not (first.isdigit() or first == "") or not (last.isdigit() or last == ""):
        return None
    if first == "":
        if last == "":
            return None
        n = int(last)
        if n == 0:
            return "unsatisfiable"
        return (max(0, size - n), size)
    start = int(first)
    end = size if last == "" else min(int(last) + 1, size)
    if last != "" and int(last) < start:
        return None
    if start >= size:
        return "unsatisfiable"
    return (start, end)


def signature_valid(query, revoked_before=0):
    """Whether a query string carries an X-Expires=UNIXTIME that has not passed and is
    not before revoked_before."""
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name == "X-Expires" and value.isdigit():
            return max(time.time(), revoked_before) < int(value)
    return False


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ggufs-fault/1"
    sys_version = ""

    def log_message(self, *args):  # the request log is ours; nothing on stderr
        pass

    def do_GET(self):
        """A GET: headers and body."""
        self.serve(True)

    def do_HEAD(self):
        """A HEAD: the GET's headers, no body."""
        self.serve(False)

    def serve(self, with_body):
        """Answers one request and logs it, however the answer ends."""
        fs = self.server.fault
        headers = {k.lower(): v for k, v in self.headers.items()}
        record = {"method": self.command, "path": self.path, "headers": headers,
                  "range": headers.get("range"), "status": 0, "bytes_sent": 0}
        fs.begin_request()
        try:
            self.answer(fs, headers, record, with_body)
        finally:
            fs.add_record(FaultRecord(**record))

    def simple(self, record, status, extra=(), body=b""):
        """A short answer (an error, a redirect) with its whole body."""
        record["status"] = status
        self.send_response(status)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)
            record["bytes_sent"] = len(body)

    def s3_error(self, record, status, code, extra=(), fields=()):
        """An S3 error: status, and S3's XML body naming code (and fields)."""
        from s3auth import error_xml
        self.simple(record, status, [("Content-Type", "application/xml")] + list(extra),
                    error_xml(code, fields))

    def answer(self, fs, headers, record, with_body):
        """The switches in the order a real stack meets them (a dead or stalled server,
        injected failures, authentication, redirect, the file, If-Match, Range), then
        the file's bytes."""
        fs.before_answer()
        if fs.stalled():  # a stalled server: the request is held, never answered
            fs.wait_unstalled()
            self.close_connection = True
            return
        if fs.hang_up:  # a server that dies: the connection closes, nothing answered
            self.close_connection = True
            return
        status = fs.take_failure()
        if status:
            extra = [("Retry-After", fs.retry_after)] if status in (429, 503) else []
            if fs.s3 is not None:
                code = {503: "SlowDown", 500: "InternalError"}.get(status, "ServiceUnavailable")
                self.s3_error(record, status, code, extra)
            else:
                self.simple(record, status, extra)
            return
        path, _, query = self.path.partition("?")
        if fs.s3 is not None:
            refusal = fs.s3.check(self.command, headers, self.path)
            if refusal is not None:
                status, code, fields, extra = refusal
                self.s3_error(record, status, code, extra, fields)
                return
            path = fs.s3.object_path(headers.get("host", ""), path)
            if "list-type=2" in query:  # ListObjectsV2 of the bucket path names
                with fs.lock:
                    files = dict(fs.files)
                bucket = path.strip("/").split("/")[0]
                if not any(p.startswith("/%s/" % bucket) for p in files):
                    self.s3_error(record, 404, "NoSuchBucket")
                    return
                body = fs.s3.listing(files, bucket, query)
                record["status"] = 200
                self.send_response(200)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                record["bytes_sent"] = len(body)
                return
            if fs.file(path) is None:
                bucket = path.split("/")[1]
                if any(p.startswith("/%s/" % bucket) for p in list(fs.files)):
                    self.s3_error(record, 404, "NoSuchKey")
                else:
                    self.s3_error(record, 404, "NoSuchBucket")
                return
        if fs.token is not None and headers.get("authorization") != "Bearer " + fs.token:
            self.simple(record, 401, [("WWW-Authenticate", 'Bearer realm="ggufs-test"')],
                        b"token required\n")
            return
        if fs.redirect_to is not None:
            location = fs.redirect_to + self.path
            if fs.sign_redirects is not None:
                location += ("&" if query else "?") + "X-Expires=%d" % (time.time() + fs.sign_redirects)
            self.simple(record, 302, [("Location", location)])
            return
        if fs.require_signature and not signature_valid(query, fs.revoked_before):
            self.simple(record, 403, (), b"signature expired\n")
            return
        f = fs.file(self.path if fs.by_query and fs.s3 is None else path)
        if f is None:
            self.simple(record, 404, (), b"not found\n")
            return
        size = len(f.content)
        common = [("Accept-Ranges", "bytes")] + list(fs.extra_headers) + f.headers
        etag = fs.force_etag if fs.force_etag is not None else f.etag
        if fs.send_validators:
            common += [("ETag", etag)] if not fs.omit_etag else []
            common += [("Last-Modified", email.utils.formatdate(f.mtime, usegmt=True))]
        match = None if fs.ignore_if_match else headers.get("if-match")
        if match is not None and match.strip() != "*" and \
                etag not in [m.strip() for m in match.split(",")]:
            if fs.s3 is not None:
                self.s3_error(record, 412, "PreconditionFailed", common)
            else:
                self.simple(record, 412, common)
            return
        rng = None if fs.ignore_range else parse_range(headers.get("range"), size)
        if rng == "unsatisfiable":
            self.simple(record, 416, common + [("Content-Range", "bytes */%d" % size)])
            return
        if rng is None:
            status, start, end = 200, 0, size
        else:
            status, (start, end) = 206, rng
            if fs.shift_ranges:  # another range than asked, truthfully labelled
                start = min(start + fs.shift_ranges, size - 1)
                end = min(end + fs.shift_ranges, size)
        record["status"] = status
        self.send_response(status)
        for k, v in common:
            self.send_header(k, v)
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size))
            if end - start > 1 and fs.take_truncation():
                end = start + (end - start) // 2  # the length agrees with the cut body
            if fs.content_encoding:
                self.send_header("Content-Encoding", fs.content_encoding)
                f = Encoded(f, start, end)
        self.send_header("Content-Length", str(end - start))
        self.end_headers()
        if with_body:
            self.send_body(fs, f, start, end, record)

    def pace(self, rate, n):
        """Waits until n more bytes fit in this connection's rate (a token bucket that
        holds one chunk: a connection that was idle may send one chunk at once)."""
        now = time.monotonic()
        credit = getattr(self, "paced_until", now)
        self.paced_until = max(credit, now - self.server.fault.chunk / rate) + n / rate
        if self.paced_until > now:
            time.sleep(self.paced_until - now)

    def send_body(self, fs, f, start, end, record):
        """Writes [start, end) of f in chunks, at the configured rate per connection,
        resetting the connection after fs.reset_after bytes when that is set (or
        when this response is one of the next ones that reset_next chose)."""
        pos = start
        reset_this = fs.take_reset()
        try:
            while pos < end:
                n = min(fs.chunk, end - pos)
                reset_at = fs.reset_after if reset_this is None else reset_this
                if reset_at is not None and record["bytes_sent"] + n >= reset_at:
                    n = reset_at - record["bytes_sent"]
                    if n > 0:
                        self.wfile.write(f.slice(pos, pos + n))
                        record["bytes_sent"] += n
                    self.reset_connection()
                    return
                self.wfile.write(f.slice(pos, pos + n))
                pos += n
                record["bytes_sent"] += n
                rate = fs.rate
                if rate:
                    self.pace(rate, n)
                if fs.closing.is_set():
                    self.close_connection = True
                    return
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def reset_connection(self):
        """Closes the connection with a TCP RST (SO_LINGER 0), as a failing peer does."""
        self.close_connection = True
        self.wfile.flush()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()


class _ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def handle_error(self, request, client_address):
        """A client that goes away mid-request is what several tests make happen; the
        fault server says nothing about it. Anything else is printed."""
        import sys
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class FaultServer:
    """`with FaultServer({'/m.gguf': data}, host='127.0.0.1') as s:` serves files
    (path -> bytes or Body) at s.url; with https=True over TLS, with a certificate made
    at start that s.cafile names. Switches, safe to flip while clients are live:

    - s.token = 'T': 401 unless `Authorization: Bearer T`;
    - s.redirect_to = URL: 302 to URL + the request's path and query;
      s.sign_redirects = SECONDS adds X-Expires=NOW+SECONDS to that URL's query, and a
      server with s.require_signature = True answers 403 unless X-Expires is still
      ahead (an expiring signed URL, as a CDN hands out); s.revoked_before = T also
      refuses those expiring before T (their expiry, without waiting for it);
    - s.ignore_range = True: 200 with the whole body, whatever Range says;
    - s.ignore_if_match = True: If-Match is not checked (the new ETag still goes out);
    - s.send_validators = False: no ETag and no Last-Modified (a plain server);
    - s.content_encoding = 'gzip': 206 answers carry that Content-Encoding and the
      range gzip'ed, padded with zeros to the range's length (Content-Range and
      Content-Length honest: only the encoding tells);
    - s.by_query = True: files are looked up by path and query ('/m.gguf?f=a' is a
      file of its own; without, the query is ignored);
    - s.omit_etag = True: no ETag, Last-Modified still (s.mtime at the last swap);
    - s.force_etag = '"E"': every file's ETag is E, whatever its bytes (a server that
      gives two contents one ETag: a cache poisoned, or a lying server);
    - s.shift_ranges = N: a range request gets the range N bytes further on, with a
      Content-Range saying so (a server that answers another range than asked);
    - s.swap(path, content): new content and a new ETag;
    - s.fail_next(n, status=503): the next n requests get status (with Retry-After:
      s.retry_after, "0" unless set, for 429 and 503); s.clear_failures() cancels those
      not yet given;
    - s.hang_up = True: every request is read, then its connection closed unanswered;
    - s.stall = True: requests are read and held unanswered until stall is cleared (or
      the server stops); the connection is then closed;
    - s.latency = SECONDS before each answer; s.rate = bytes per second per
      connection (a token bucket), written in pieces of s.chunk bytes (64 KiB);
    - s.truncate_next(n): the next n 206 answers carry the first half of the range
      asked, with a Content-Length that says so but the full Content-Range (a body
      cut short that only counting against Content-Range detects);
    - s.reset_after = N: a body is cut after N bytes with a TCP reset;
      s.reset_next(n, after=N): only the next n bodies are;
    - s.extra_headers = [(name, value)] added to file responses (X-Repo-Commit...);
    - s.s3 = S3Auth(...): S3's semantics (s3auth.py): files are named /BUCKET/KEY
      (KEY decoded), each request is checked by its Signature V4 (or its anonymity),
      and injected failures, refusals, 404s and 412s carry S3's XML error bodies
      (503 SlowDown, 500 InternalError, NoSuchKey, NoSuchBucket, ...).

    s.log() gives every request so far (FaultRecord), s.log_settled(n) once n are
    logged; s.clear_log() empties it. s.max_in_flight: the most requests that were
    being answered at once (since the last clear_log)."""

    def __init__(self, files, host="127.0.0.1", https=False):
        self.host = host
        self.https = https
        self.cafile = None
        self.tls_dir = None
        self.lock = threading.Lock()
        self.files = {}
        self.versions = {}
        self.mtime = 1700000000  # a fixed Last-Modified, so tests can check it
        for path, content in files.items():
            self.swap(path, content)
        self.token = None
        self.redirect_to = None
        self.ignore_range = False
        self.hang_up = False
        self.ignore_if_match = False
        self.send_validators = True
        self.force_etag = None
        self.omit_etag = False
        self.by_query = False
        self.content_encoding = None
        self.shift_ranges = 0
        self.sign_redirects = None
        self.require_signature = False
        self.revoked_before = 0
        self.latency = 0.0
        self.rate = None
        self.chunk = 64 * 1024
        self.reset_after = None
        self.retry_after = "0"
        self.extra_headers = []
        self.s3 = None
        self._failures = []
        self._resets = []
        self._truncations = 0
        self._stall = threading.Event()
        self._unstall = threading.Event()
        self._unstall.set()
        self.closing = threading.Event()
        self._log = []
        self._in_flight = 0
        self.max_in_flight = 0
        self.httpd = None
        self.thread = None
        self.url = None
        self.port = None

    # -- switches --

    def swap(self, path, content, headers=()):
        """Replaces (or adds) the file at path (sent with headers); the new version has a
        new ETag."""
        with self.lock:
            version = self.versions.get(path, 0) + 1
            self.versions[path] = version
            self.files[path] = ServedFile(content, self.mtime, version, headers)

    def remove(self, path):
        """Takes the file at path away (404 from now on)."""
        with self.lock:
            self.files.pop(path, None)

    def file(self, path):
        """The ServedFile at path now, or None."""
        with self.lock:
            return self.files.get(path)

    def fail_next(self, n, status=503):
        """The next n requests are answered status, whatever they ask."""
        with self.lock:
            self._failures.extend([status] * n)

    def clear_failures(self):
        """Cancels the injected failures and resets not given yet."""
        with self.lock:
            self._failures = []
            self._resets = []
            self._truncations = 0

    def reset_next(self, n, after=0):
        """The next n bodies are cut with a TCP reset after `after` bytes."""
        with self.lock:
            self._resets.extend([after] * n)

    def truncate_next(self, n):
        """The next n 206 answers are cut to half their range (truncate_next above)."""
        with self.lock:
            self._truncations += n

    def take_truncation(self):
        """Whether the 206 answer about to be sent is cut short."""
        with self.lock:
            if self._truncations:
                self._truncations -= 1
                return True
            return False

    def take_reset(self):
        """Where reset_next cuts the body about to be sent, or None."""
        with self.lock:
            return self._resets.pop(0) if self._resets else None

    def take_failure(self):
        """The status injected for this request, or None."""
        with self.lock:
            return self._failures.pop(0) if self._failures else None

    @property
    def stall(self):
        """Whether requests are held unanswered."""
        return self._stall.is_set()

    @stall.setter
    def stall(self, on):
        """Holds requests from now on (True), or lets the held ones go (False)."""
        if on:
            self._unstall.clear()
            self._stall.set()
        else:
            self._stall.clear()
            self._unstall.set()

    def stalled(self):
        """Whether a request arriving now is held."""
        return self._stall.is_set()

    def wait_unstalled(self):
        """Blocks until the stall ends or the server stops."""
        while not self._unstall.wait(0.1):
            if self.closing.is_set():
                return

    def before_answer(self):
        """The configured latency, before anything is answered."""
        if self.latency:
            time.sleep(self.latency)

    # -- the log --

    def begin_request(self):
        """Counts a request that is being answered (for max_in_flight)."""
        with self.lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def add_record(self, record):
        """Logs a request that has ended."""
        with self.lock:
            self._in_flight -= 1
            self._log.append(record)

    def log(self):
        """Every request that has ended so far, oldest first."""
        with self.lock:
            return list(self._log)

    def log_settled(self, at_least=0, timeout=5.0):
        """log() once at least at_least requests are logged (a request is logged when
        its answer has been written, so a client may be a moment ahead of the log)."""
        return settled(self.log, at_least, timeout)

    def quiet(self, for_s=0.3, timeout=10.0):
        """Waits until no request is being answered and none has ended for for_s seconds
        (a client's read-ahead from earlier reads has run out), or timeout passes."""
        deadline = time.monotonic() + timeout
        seen, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            with self.lock:
                n, busy = len(self._log), self._in_flight
            if n != seen or busy:
                seen, since = n, time.monotonic()
            elif time.monotonic() - since >= for_s:
                return
            time.sleep(0.02)

    def clear_log(self):
        """Empties the log and restarts max_in_flight from the requests running now."""
        with self.lock:
            self._log = []
            self.max_in_flight = self._in_flight

    # -- life --

    def __enter__(self):
        """Starts serving on a port the kernel picks."""
        self.httpd = _ThreadingServer((self.host, 0), _Handler)
        self.httpd.fault = self
        self.port = self.httpd.server_address[1]
        self.url = "http://%s:%d" % (self.host, self.port)
        if self.https:  # a certificate of its own (make_cert): s.cafile trusts it
            import ssl
            self.tls_dir = tempfile.mkdtemp(prefix="ggufs-fault-tls-")
            self.cafile, key = make_cert(self.tls_dir, self.host)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.cafile, key)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            self.url = "https://%s:%d" % (self.host, self.port)
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        """Stops serving; held (stalled) requests are let go and their connections
        closed."""
        self.closing.set()
        self.stall = False
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(STOP_TIMEOUT)
        if self.tls_dir:
            shutil.rmtree(self.tls_dir, ignore_errors=True)
        return False
