"""Real HTTP servers on loopback for the remote-mount tests, run as processes: nginx
(and the helpers every server here uses: a free port, waiting for a listener, a
self-signed certificate, stopping a process by its PID).

All listen on 127.0.0.0/8 only, on a port the kernel chose free, and are context
managers that stop their server on exit. The fault server written in Python is
fault_server.py; the hub on top of it, hub_server.py; s3rver, s3rver.py.

- Nginx(root_dir, https=False): nginx-light with its own temporary configuration,
  serving root_dir, over http or over https with a self-signed certificate made with
  openssl at start. Its access log records, per request: method, uri, Range header,
  status, bytes sent and whether an Authorization header came (never the header).
"""
import collections
import os
import shutil
import signal
import socket
import subprocess
import tempfile
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


def settled(read_log, at_least, timeout):
    """read_log() once it holds at least at_least requests, or after timeout seconds:
    a server logs a request once its answer has gone, so a client may be a moment ahead
    of the log."""
    deadline = time.monotonic() + timeout
    while True:
        r = read_log()
        if len(r) >= at_least or time.monotonic() > deadline:
            return r
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
        return settled(self.records, at_least, timeout)

    def clear_log(self):
        """Empties the access log (nginx keeps appending to the same open file)."""
        with open(self.access_log, "w"):
            pass



# ---- the fault server ----
