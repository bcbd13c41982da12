"""s3rver, a real S3 implementation (Node; pinned at 3.7.1 by tests/s3rver/package-lock
.json, installed there with npm ci), on 127.0.0.1 for the s3:// tests: S3's own
listing XML, ranges, ETags and error bodies. It checks the access key id, not the
signature (its source: "Signature version 4 calculation is unimplemented"): s3auth.py's
botocore server proves the signature.

`with S3rver(["models"]) as s:` starts it on a free port with those buckets, in a
temporary directory, and stops it by its PID on exit; s.put(bucket, key, data) and
s.delete(bucket, key) change objects through its API (signed by botocore, as any
client's would be); s.url is its endpoint, s.env(home) a client's environment. Without node or the package, S3rver.missing()
says why."""
import http.client
import os
import shutil
import subprocess
import tempfile
import urllib.parse

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from servers import ProcessServer, free_port, wait_listening

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "..", "s3rver")
BIN = os.path.join(PACKAGE, "node_modules", "s3rver", "bin", "s3rver.js")
# s3rver's one built-in key pair
ACCESS_KEY = "S3RVER"
SECRET_KEY = "S3RVER"


class S3rver(ProcessServer):
    def __init__(self, buckets):
        self.buckets = list(buckets)
        self.dir = None
        self.proc = None
        self.port = None
        self.url = None

    @staticmethod
    def missing():
        """Why s3rver cannot run here, or None."""
        if not shutil.which("node"):
            return "node is not installed"
        if not os.path.exists(BIN):
            return "s3rver is not installed (npm ci in tests/s3rver)"
        return None

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="ggufs-s3rver-")
        last = None
        for _ in range(5):  # another process may take the free port first
            self.port = free_port()
            args = ["node", BIN, "-d", os.path.join(self.dir, "data"), "-a", "127.0.0.1",
                    "-p", str(self.port), "--silent", "--no-vhost-buckets"]
            for b in self.buckets:
                args += ["--configure-bucket", b]
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                wait_listening("127.0.0.1", self.port, self.proc, timeout=30)
                break
            except RuntimeError as e:
                last = str(e)
                self.stop()
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise RuntimeError("s3rver did not start: %s" % last)
        self.url = "http://127.0.0.1:%d" % self.port
        return self

    def request(self, method, bucket, key, body=b""):
        """One signed request to the API: (status, body)."""
        path = "/%s/%s" % (bucket, urllib.parse.quote(key.encode(), safe="/~"))
        req = AWSRequest(method=method, url=self.url + path, data=body)
        S3SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", "us-east-1").add_auth(req)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=dict(req.headers.items()))
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def env(self, home, **extra):
        """The environment of a client of this server: its key pair and endpoint, HOME at
        home (so no ~/.aws of the caller's is read), none of the caller's AWS_ settings;
        then extra."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(HOME=home, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                   AWS_ENDPOINT_URL=self.url)
        env.update(extra)
        return env

    def put(self, bucket, key, data):
        """Creates or overwrites an object (a new ETag for new bytes)."""
        status, body = self.request("PUT", bucket, key, bytes(data))
        if status != 200:
            raise RuntimeError("PUT %s/%s: %d %r" % (bucket, key, status, body[:200]))

    def delete(self, bucket, key):
        status, body = self.request("DELETE", bucket, key)
        if status != 204:
            raise RuntimeError("DELETE %s/%s: %d %r" % (bucket, key, status, body[:200]))

