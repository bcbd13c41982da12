"""Real HTTP servers on loopback for the remote-mount tests: nginx, and a fault server.

Both listen on 127.0.0.0/8 only, on a port the kernel chose free, and are context
managers that stop their server (nginx by its PID) on exit.

- Nginx(root_dir, https=False): nginx-light with its own temporary configuration,
  serving root_dir, over http or over https with a self-signed certificate made with
  openssl at start. Its access log records, per request: method, uri, Range header,
  status, bytes sent and whether an Authorization header came (never the header).
- FaultServer(files, host='127.0.0.1'): a threaded HTTP/1.1 server written here, with
  its own Range handling and switches that a test flips while a mount is live: require
  a token, redirect, ignore Range, swap a file, fail the next N requests, stall, add
  latency, limit the rate per connection, reset a connection after N bytes. With
  s.s3 = S3Auth(...) (s3auth.py) it speaks S3: every request's Signature V4 checked
  by botocore, objects addressed path style or virtual-hosted, errors as S3's XML.
"""
import collections
import email.utils
import hashlib
import json
import http.server
import os
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import tempfile
import threading
import time

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


def free_port(host="127.0.0.1"):
    """A TCP port that was free on host a moment ago (for servers that must be told
    their port, like nginx)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_listening(host, port, proc, timeout=START_TIMEOUT):
    """Polls until host:port accepts a connection; raises if proc exits first or the
    deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("server exited %d before listening" % proc.returncode)
        try:
            socket.create_connection((host, port), timeout=1.0).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("nothing listens on %s:%d after %g s" % (host, port, timeout))
            time.sleep(0.02)


def make_cert(directory, host="127.0.0.1"):
    """A self-signed certificate for IP host, made with openssl: returns (cert, key)
    paths. The certificate is its own CA, so it is also the cafile clients verify with."""
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec",
                    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2",
                    "-subj", "/CN=%s" % host, "-addext", "subjectAltName=IP:%s" % host],
                   check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    return cert, key


# One request as the server saw it. range: the Range header or None; auth: whether an
# Authorization header came; bytes_sent: what the server wrote for it, headers included
# for nginx ($bytes_sent), body only for the fault server.
NginxRecord = collections.namedtuple("NginxRecord", "method path range status bytes_sent auth")

# What every nginx configuration of the tests begins with (events and http follow):
# one worker, run as root, every file in the server's scratch directory {dir}.
NGINX_TOP = """\
worker_processes 1;
user root root;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
"""
# The temporary paths of an http block, in {dir}/tmp.
NGINX_TEMP_PATHS = """\
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
"""
NGINX_CONF = NGINX_TOP + """\
events {{ worker_connections 256; }}
http {{
""" + NGINX_TEMP_PATHS + """\
    types {{ }}
    default_type application/octet-stream;
    map $http_authorization $ggufs_auth {{ "" "-"; default "auth"; }}
    log_format ggufs '$request_method\\t$request_uri\\t$http_range\\t$status\\t$bytes_sent\\t$ggufs_auth';
    access_log {dir}/access.log ggufs;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{port}{ssl};
        server_name 127.0.0.1;
        root {root};
        {tls}
        location / {{ }}
    }}
}}
"""


def stop_process(proc):
    """Stops a server process started by a test, by its PID: SIGTERM, then SIGKILL after
    STOP_TIMEOUT seconds; waits for it and closes its stderr pipe. None: nothing."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr:
        proc.stderr.close()


class ProcessServer:
    """A server run as a child process (self.proc) with a scratch directory of its own
    (self.dir): stop() ends it by its PID; leaving the with block stops it and removes
    the directory."""
    proc = None
    dir = None

    def stop(self):
        """Stops the server by its PID, waiting for it."""
        stop_process(self.proc)
        self.proc = None

    def __exit__(self, *exc):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        return False


class NginxProcess(ProcessServer):
    """An nginx of a test's own, everything in its scratch directory self.dir."""

    def start_nginx(self, write_conf):
        """Starts nginx with self.dir/nginx.conf as write_conf(port) writes it, on a free
        port of 127.0.0.1 (self.port; another process may take it first: five tries).
        RuntimeError, self.dir removed, when it does not start."""
        last = None
        for _ in range(5):
            self.port = free_port()
            write_conf(self.port)
            self.proc = subprocess.Popen(
                ["nginx", "-p", self.dir, "-c", self.conf_path(),
                 "-e", os.path.join(self.dir, "error.log"), "-g", "daemon off;"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE)
            try:
                wait_listening("127.0.0.1", self.port, self.proc)
                return
            except RuntimeError as e:
                last = "%s: %s %s" % (e, self.proc_stderr(), self.error_log())
                self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        raise RuntimeError("nginx did not start: " + last)

    def conf_path(self):
        """The temporary nginx.conf this server runs with."""
        return os.path.join(self.dir, "nginx.conf")

    def proc_stderr(self):
        """What nginx wrote to stderr, once it has exited (for a failed start)."""
        if self.proc and self.proc.poll() is not None and self.proc.stderr:
            return self.proc.stderr.read().decode(errors="replace")
        return ""

    def error_log(self):
        """nginx's error log, or "" before there is one."""
        try:
            with open(os.path.join(self.dir, "error.log")) as f:
                return f.read()
        except OSError:
            return ""


class Nginx(NginxProcess):
    """`with Nginx(root_dir, https=False) as n:` serves root_dir at n.url with nginx-light;
    n.cafile is the certificate to trust for https (None for http); n.records() parses
    the access log."""

    def __init__(self, root_dir, https=False):
        self.root = os.path.abspath(root_dir)
        self.https = https
        self.dir = None
        self.proc = None
        self.port = None
        self.cafile = None
        self.url = None

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="ggufs-nginx-")
        os.mkdir(os.path.join(self.dir, "tmp"))
        tls = ""
        if self.https:
            cert, key = make_cert(self.dir)
            self.cafile = cert
            tls = "ssl_certificate %s; ssl_certificate_key %s;" % (cert, key)

        def write_conf(port):
            with open(self.conf_path(), "w") as f:
                f.write(NGINX_CONF.format(dir=self.dir, port=port, root=self.root,
                                          ssl=" ssl" if self.https else "", tls=tls))
        self.start_nginx(write_conf)
        self.url = "%s://127.0.0.1:%d" % ("https" if self.https else "http", self.port)
        return self

    @property
    def access_log(self):
        """The access log's path (one line per request, format ggufs above)."""
        return os.path.join(self.dir, "access.log")

    def records(self):
        """Every request logged so far, oldest first."""
        out = []
        try:
            with open(self.access_log) as f:
                for line in f:
                    method, path, rng, status, sent, auth = line.rstrip("\n").split("\t")
                    out.append(NginxRecord(method, path, None if rng == "-" else rng,
                                           int(status), int(sent), auth == "auth"))
        except FileNotFoundError:
            pass
        return out

    def records_settled(self, at_least=0, timeout=5.0):
        """records() once at least at_least requests are logged (nginx writes the line
        after the response has gone, so a client may be a moment ahead of the log)."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.records()
            if len(r) >= at_least or time.monotonic() > deadline:
                return r
            time.sleep(0.02)

    def clear_log(self):
        """Empties the access log (nginx keeps appending to the same open file)."""
        with open(self.access_log, "w"):
            pass



# ---- the fault server ----

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
        deadline = time.monotonic() + timeout
        while True:
            r = self.log()
            if len(r) >= at_least or time.monotonic() > deadline:
                return r
            time.sleep(0.02)

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


class HubServer(FaultServer):
    """`with HubServer("owner/repo") as hub: hub.commit(folder)` serves a folder as a
    Hugging Face hub repository at hub.url (HF_ENDPOINT), under the hub's routes:

    - GET /api/models/OWNER/REPO/revision/REV: {"id", "sha"} (REV main, or a commit);
    - GET /api/models/OWNER/REPO/tree/REV[/PATH]?recursive=true: every file and folder
      under PATH as huggingface_hub's list_repo_tree reads them ({"type": "file" or
      "directory", "oid", "size", "path", and for .gguf files "lfs": {"oid": sha256,
      "size", "pointerSize"}}), page_size entries a page, each page but the last with
      a Link: <URL&cursor=N>; rel="next" header;
    - GET /OWNER/REPO/resolve/REV/PATH: the bytes (Range honoured), with X-Repo-Commit.

    commit(folder) makes the folder's files the next commit and points main at it (the
    older commits stay served by their sha): a repository that changes after a mount.
    Every FaultServer switch applies (token, fail_next, latency, rate, ...)."""

    def __init__(self, repo="owner/repo", page_size=3, host="127.0.0.1"):
        super().__init__({}, host=host)
        self.repo = repo
        self.page_size = page_size
        self.by_query = True
        self.commits = []

    @staticmethod
    def read_folder(folder):
        """{relative path: bytes} of every file under folder."""
        out = {}
        for dirpath, _, names in os.walk(folder):
            for n in names:
                p = os.path.join(dirpath, n)
                with open(p, "rb") as f:
                    out[os.path.relpath(p, folder)] = f.read()
        return out

    def entries(self, files):
        """The tree API's entries of files ({path: bytes}), folders included, by path."""
        dirs = set()
        for path in files:
            parts = path.split("/")
            for k in range(1, len(parts)):
                dirs.add("/".join(parts[:k]))
        out = [{"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0,
                "path": d} for d in dirs]
        for path, data in files.items():
            e = {"type": "file", "oid": hashlib.sha1(data).hexdigest(), "size": len(data),
                 "path": path}
            if path.endswith(".gguf"):
                e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                            "pointerSize": 134}
            out.append(e)
        return sorted(out, key=lambda e: e["path"])

    def serve_tree(self, rev, entries, folder):
        """The pages of the listing of folder ("" for the root) at rev."""
        from urllib.parse import quote
        under = [e for e in entries if not folder or e["path"].startswith(folder + "/")]
        base = "/api/models/%s/tree/%s%s?recursive=true" % (
            self.repo, rev, "/" + quote(folder, safe="/") if folder else "")
        pages = [under[i:i + self.page_size] for i in range(0, len(under), self.page_size)] or [[]]
        for k, page in enumerate(pages):
            key = base + ("&cursor=%d" % k if k else "")
            headers = []
            if k + 1 < len(pages):
                headers = [("Link", '<%s%s&cursor=%d>; rel="next"' % (self.url, base, k + 1))]
            self.swap(key, json.dumps(page).encode(), headers)

    def commit(self, folder=None, files=None):
        """The files of folder (or files, {path: bytes}) as the next commit, main's."""
        from urllib.parse import quote
        files = files if files is not None else self.read_folder(folder)
        sha = hashlib.sha1(("%d" % len(self.commits)).encode() +
                           b"".join(k.encode() + v for k, v in sorted(files.items()))).hexdigest()
        self.commits.append(sha)
        entries = self.entries(files)
        folders = [""] + [e["path"] for e in entries if e["type"] == "directory"]
        for rev in (sha, "main"):
            body = json.dumps({"id": self.repo, "sha": sha}).encode()
            self.swap("/api/models/%s/revision/%s" % (self.repo, rev), body)
            for f in folders:
                self.serve_tree(rev, entries, f)
            for path, data in files.items():
                self.swap("/%s/resolve/%s/%s" % (self.repo, rev, quote(path, safe="/")), data,
                          [("X-Repo-Commit", sha)])
        return sha
