#!/usr/bin/env python3
"""Peak RSS of a library mount over a large listing (issue 37, item 8): a benchmark
(listing_rss) or a measurement run by hand, not a test.

    measure_listing_rss.py GGUFS hub ENTRIES PATH_BYTES
    measure_listing_rss.py GGUFS s3 KEYS NAME_BYTES
    measure_listing_rss.py GGUFS all      (hub 200000 200, then s3 150000 200: the
                                           benchmark listing_rss)

hub: a hub repository of ENTRIES files under one folder, each path PATH_BYTES long,
served 1,000 entries a page by a server on loopback that makes each page when asked;
s3: a bucket of KEYS objects in one folder, each name NAME_BYTES long, listed 1,000 keys
a page (anonymous, the fault server's S3 listing). The daemon (`ggufs -f`) mounts it,
the root is listed (and for s3 the folder), then it is unmounted; printed: whether it
mounted, what it said, its peak RSS (/usr/bin/time's maximum resident set size) and the
seconds it took. A daemon past 12 GB is killed (it would take the machine)."""
import http.server
import json
import os
import re
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mount"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

KILL_KB = 12 << 20
PAGE = 1000
COMMIT = "c" * 40


class HubPages(http.server.BaseHTTPRequestHandler):
    """The revision and the tree pages of one repository of server.count files."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        if "/revision/" in self.path:
            return self.send(json.dumps({"id": "o/r", "sha": COMMIT}).encode())
        m = re.search(r"cursor=(\d+)", self.path)
        k = int(m.group(1)) if m else 0
        first, last = k * PAGE, min((k + 1) * PAGE, srv.count)
        pad = srv.path_bytes - len("d/0000000.bin")
        entries = [{"type": "file", "size": 1, "oid": "0",
                    "path": "d/%s%07d.bin" % ("x" * pad, i)} for i in range(first, last)]
        if k == 0:
            entries.insert(0, {"type": "directory", "oid": "0", "size": 0, "path": "d"})
        link = None
        if last < srv.count:
            link = '<http://127.0.0.1:%d/api/models/o/r/tree/%s?recursive=true&cursor=%d>; ' \
                   'rel="next"' % (srv.server_address[1], COMMIT, k + 1)
        self.send(json.dumps(entries).encode(), link)

    def send(self, body, link=None):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if link:
            self.send_header("Link", link)
        self.end_headers()
        self.wfile.write(body)


class Threading(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def run_daemon(ggufs, name, env, after_mount, opts=()):
    """Mounts name with ggufs -f under /usr/bin/time, runs after_mount(mountpoint) once
    it is mounted, unmounts: (mounted, stderr, peak KB, seconds)."""
    mnt = tempfile.mkdtemp(prefix="ggufs-rss-")
    timing = mnt + ".time"
    start = time.monotonic()
    p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", timing, ggufs, "-f",
                          "-o", "cache_dir=none"] + list(opts) + [name, mnt], env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    mounted = False
    try:
        while p.poll() is None:
            if os.path.ismount(mnt):
                mounted = True
                after_mount(mnt)
                break
            if child_rss_kb(p.pid) > KILL_KB:
                p.kill()
                break
            time.sleep(0.2)
    finally:
        if mounted:
            subprocess.run(["fusermount3", "-u", mnt])
        try:
            p.wait(timeout=600)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    took = time.monotonic() - start
    err = p.stderr.read().decode(errors="replace").strip()
    with open(timing) as f:
        peak = int(f.read().split()[-1])
    os.unlink(timing)
    os.rmdir(mnt)
    return mounted, err, peak, took


def child_rss_kb(pid):
    """The RSS of the ggufs child of /usr/bin/time (pid), in KB (0 if unknown)."""
    try:
        kids = open("/proc/%d/task/%d/children" % (pid, pid)).read().split()
        for k in kids:
            for line in open("/proc/%s/status" % k):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def listing(mnt, *parts):
    def go(m):
        for part in ("",) + parts:
            n = len(os.listdir(os.path.join(m, part)))
            print("  %s/: %d entries" % (part, n))
    return go


def main():
    if len(sys.argv) == 3 and sys.argv[2] == "all":
        # the benchmark (meson test --benchmark listing_rss): issue 37's two listings
        for kind, count, size in (("hub", 200000, 200), ("s3", 150000, 200)):
            measure(sys.argv[1], kind, count, size)
        return
    measure(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))


def measure(ggufs, kind, count, size):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and k not in ("HF_TOKEN", "HF_ENDPOINT")}
    if kind == "hub":
        srv = Threading(("127.0.0.1", 0), HubPages)
        srv.count, srv.path_bytes = count, size
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        env["HF_ENDPOINT"] = "http://127.0.0.1:%d" % srv.server_address[1]
        result = run_daemon(ggufs, "hf://o/r", env, listing(None, "d"))
        srv.shutdown()
    else:
        from fault_server import FaultServer
        from s3auth import S3Auth
        pad = size - len("0000000.bin")
        files = {"/b/lib/%s%07d.bin" % ("x" * pad, i): b"x" for i in range(count)}
        home = tempfile.mkdtemp(prefix="ggufs-rss-home-")
        with FaultServer(files) as s:
            s.s3 = S3Auth({}, anonymous=True)
            env.update(HOME=home, AWS_ENDPOINT_URL=s.url, AWS_REGION="us-east-1")
            result = run_daemon(ggufs, "s3://b/", env, listing(None, "lib"),
                                ["-o", "s3_anonymous"])
        shutil.rmtree(home)
    mounted, err, peak, took = result
    names = count * (size + 1) / 1e6
    print("%s %d x %d bytes: mounted %s, peak RSS %.1f MB (%.1f x the %.1f MB of names), "
          "%.1f s" % (kind, count, size, mounted, peak / 1024, peak * 1024 / 1e6 / names,
                      names, took), flush=True)
    if err:
        print("  stderr: " + err[:300])


if __name__ == "__main__":
    main()
