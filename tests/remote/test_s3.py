#!/usr/bin/env python3
"""s3:// against an independent signer: the fault server in S3 mode (s3auth.py), which
recomputes every request's Signature V4 with botocore's S3SigV4Auth from the request's
meaning and refuses a mismatch with S3's SignatureDoesNotMatch.

- path style (a custom endpoint) and virtual-hosted (-o s3_virtual_host: BUCKET.localhost,
  which libcurl resolves to loopback itself, no DNS): the mount equals the local one;
  every request signed, with x-amz-content-sha256 among the signed headers;
- keys with spaces, '+', '%', '=', unicode, '~' and "." / ".." parts;
- a split set through S3, named by a shard that is not the first;
- a session token (from a profile in AWS_SHARED_CREDENTIALS_FILE) sent and signed;
- refusals at mount in one line that names the credentials' source, region and
  endpoint and never the secret: a wrong secret (SignatureDoesNotMatch), an unknown key
  id, a wrong region (AuthorizationHeaderMalformed), NoSuchKey, NoSuchBucket,
  AccessDenied (anonymous), PermanentRedirect; a credentials file others may read;
- the secret in no argv, log file, cache directory, user.ggufs.url, stderr, and no
  signature or token sent to the host a redirect leads to (127.0.0.2);
- faults with S3's semantics: 503 SlowDown and 500 InternalError retried, a reset mid-
  body, an object overwritten during a read (EIO, said once)."""
import errno
import json
import os
import shutil
import tempfile
import unittest

from remote_common import (TinyCase, EIO_TIMEOUT, TINY, EnvMount, FaultServer, compare_mounts, gm,
                           read_bounded, split_gguf)
from s3auth import S3Auth

AKID = "AKIAGGUFSTEST0000001"
SECRET = "s3cr3t/Must+Not=Leak0000000000000000000"
TOKEN = "FwoGZXIvYXdzE+session/token=ThatMustNotLeak"
BUCKET = "models"
KEY = "tinyllama/tinyllama-q4km.gguf"


def aws_env(home, **extra):
    """An environment with no AWS or HF setting of the caller's, HOME at home (so no
    ~/.aws of the machine's is read), plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and k not in ("HF_TOKEN", "HF_ENDPOINT")}
    env["HOME"] = home
    env.update(extra)
    return env


class S3(TinyCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.local = gm.Mount(TINY).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.local.__exit__(None, None, None)

    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="ggufs-s3-home-")

    def tearDown(self):
        shutil.rmtree(self.home, ignore_errors=True)

    def server(self, files, **auth):
        """A fault server in S3 mode holding files ({'/BUCKET/KEY': bytes}), our key
        pair known to it."""
        s = FaultServer(files)
        s.s3 = S3Auth({AKID: (auth.pop("secret", SECRET), auth.pop("token", None))}, **auth)
        return s

    def env(self, s, **extra):
        """Credentials and endpoint in the environment, for server s."""
        base = dict(AWS_ACCESS_KEY_ID=AKID, AWS_SECRET_ACCESS_KEY=SECRET,
                    AWS_ENDPOINT_URL=s.url)
        base.update(extra)
        return aws_env(self.home, **base)

    def assert_all_signed(self, s):
        """Every request the server saw was signed right, with the headers S3 wants."""
        log = s.log()
        self.assertTrue(log)
        self.assertEqual(s.s3.refused, [])
        self.assertEqual(s.s3.verified, len(log))
        for names in s.s3.signed_headers:
            for need in ("host", "x-amz-date", "x-amz-content-sha256"):
                self.assertIn(need, names)

    def read_tensors(self, m, names=("output.weight", "blk.1.ffn_down.weight")):
        for name in names:
            a, _ = self.extents[name]
            got = gm.read_file(m.p("tensors", name))
            self.assertGreater(len(got), 0)
            self.assertEqual(got, self.data[a:a + len(got)], name)

    def refused(self, name, env, opts=()):
        """The mount's refusal: its one stderr line (exit 1, nothing mounted)."""
        err = gm.refused_mount(list(opts) + [name], env=env, prefix="ggufs-s3-mnt-")
        self.assertNotIn(SECRET, err)
        self.assertNotIn(TOKEN, err)
        return err

    # ---- addressing ----

    def test_path_style_equals_the_local_mount(self):
        with self.server({"/%s/%s" % (BUCKET, KEY): self.data}) as s:
            name = "s3://%s/%s" % (BUCKET, KEY)
            with EnvMount(name, env=self.env(s)) as m:
                compare_mounts(self, self.local.path, m.path, os.path.basename(KEY), [name])
            self.assert_all_signed(s)
            self.assertTrue(all(p.startswith("/%s/" % BUCKET) for p in s.s3.paths))
            self.assertTrue(any(r.range for r in s.log()))

    def test_virtual_host(self):
        with self.server({"/%s/%s" % (BUCKET, KEY): self.data}) as s:
            env = self.env(s, AWS_ENDPOINT_URL="http://localhost:%d" % s.port)
            with EnvMount("s3://%s/%s" % (BUCKET, KEY), ["-o", "s3_virtual_host"], env=env) as m:
                self.read_tensors(m)
            self.assert_all_signed(s)
            hosts = {r.headers.get("host") for r in s.log()}
            self.assertEqual(hosts, {"%s.localhost:%d" % (BUCKET, s.port)})
            self.assertTrue(all(p.startswith("/tinyllama/") for p in s.s3.paths))
            # a bucket that cannot be a host name is refused with the reason
            err = self.refused("s3://my.models/x.gguf", env, ["-o", "s3_virtual_host"])
            self.assertIn("cannot be a host name", err)

    def test_keys_encoded_by_s3_rules(self):
        keys = ["dir with space/a b.gguf", "plus+and=equals.gguf", "per%25cent%.gguf",
                "unicod\u00e9/\u00fcber-\u6a21\u578b.gguf", "tilde~/x~y.gguf",
                "dots/./../x.gguf", "semi;colon,comma!(x)*'@$&.gguf"]
        files = {"/%s/%s" % (BUCKET, k): self.data for k in keys}
        with self.server(files) as s:
            for k in keys:
                with EnvMount("s3://%s/%s" % (BUCKET, k), env=self.env(s)) as m:
                    self.read_tensors(m, ("output_norm.weight",))
            self.assert_all_signed(s)
            # each path went out as S3 encodes it: upper-case hex, nothing raw but
            # unreserved bytes and '/'
            for p in s.s3.paths:
                self.assertRegex(p, r"^[A-Za-z0-9._~/%-]+$")
                self.assertNotRegex(p, r"%[0-9A-F]?[a-f]")

    def test_split_set_by_any_shard(self):
        d = tempfile.mkdtemp(prefix="ggufs-s3-split-")
        try:
            shards = split_gguf(TINY, d, "tiny q4", 3)
            files = {"/%s/split/%s" % (BUCKET, os.path.basename(p)): gm.read_file(p)
                     for p in shards}
            with self.server(files) as s:
                name = "s3://%s/split/%s" % (BUCKET, os.path.basename(shards[1]))
                with EnvMount(name, env=self.env(s)) as m:
                    self.read_tensors(m)
                    with open(m.p("summary.txt")) as f:
                        summary = f.read()
                    for p in shards:
                        self.assertIn(os.path.basename(p), summary)
                self.assert_all_signed(s)
                asked = {r.path.split("?")[0] for r in s.log()}
                self.assertEqual(len(asked), 3, asked)
        finally:
            shutil.rmtree(d)

    def test_check(self):
        """--check reads an s3:// model as a mount does, options included."""
        with self.server({"/%s/%s" % (BUCKET, KEY): self.data}) as s:
            name = "s3://%s/%s" % (BUCKET, KEY)
            r = gm.run_ggufs(["--check", name], env=self.env(s), timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(b"0 unhealthy", r.stdout)
            self.assert_all_signed(s)
            r = gm.run_ggufs(["--check", "-o", "s3_anonymous", name], env=self.env(s), timeout=60)
            self.assertEqual(r.returncode, 3)
            self.assertIn(b"HTTP 403 AccessDenied", r.stderr)

    # ---- buckets and prefixes as libraries ----

    def test_check_prefix_as_library(self):
        """--check s3://BUCKET/PREFIX/ and s3://BUCKET check the library a mount of them
        gives, every model in the library's order (not the prefix read as one key)."""
        files = {"/models/pub/a.gguf": self.data, "/models/pub/sub/b.gguf": self.data,
                 "/models/pub/README.md": b"# card\n", "/models/top.gguf": self.data}
        with self.server(files) as s:
            for name, want in (("s3://models/pub/", ["pub/a.gguf", "pub/sub/b.gguf"]),
                               ("s3://models", ["pub/a.gguf", "pub/sub/b.gguf", "top.gguf"])):
                r = gm.run_ggufs(["--check", name], env=self.env(s), timeout=120)
                self.assertEqual(r.returncode, 0, r.stderr)
                shown = [line.split(": ")[0] for line in r.stdout.decode().splitlines()
                         if "tensors checked" in line]
                self.assertEqual(shown, ["s3://models/" + k for k in want], r.stdout)
                r = gm.run_ggufs(["--check", "--json", name], env=self.env(s), timeout=120)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(len(json.loads(r.stdout)), len(want))
            self.assert_all_signed(s)


    def test_bucket_as_library(self):
        """s3://BUCKET and s3://BUCKET/PREFIX/ mount as libraries: listed with
        ListObjectsV2 in pages (a continuation token of '+', '/' and '=' in the signed,
        sorted query), one directory per model (the single mount's tree), other objects
        as themselves, hostile names left out."""
        d = tempfile.mkdtemp(prefix="ggufs-s3-lib-")
        try:
            shards = split_gguf(TINY, d, "big", 2)
            files = {"/models/tiny.gguf": self.data, "/models/README.md": b"# card\n",
                     "/models/pub/repo/Tiny Q4+K.gguf": self.data,
                     "/models/pub/repo/empty.txt": b"",
                     "/models/../evil.gguf": self.data, "/models/a/./b.gguf": self.data}
            for p in shards:
                files["/models/pub/repo/" + os.path.basename(p)] = gm.read_file(p)
            for i in range(5):
                files["/models/many/f%02d.bin" % i] = b"x" * i
            with self.server(files) as s:
                s.s3.page_size = 2   # every folder in pages
                with EnvMount("s3://models", env=self.env(s)) as m:
                    self.assertEqual(sorted(os.listdir(m.path)),
                                     ["README.md", "a", "many", "models.json", "models.tsv",
                                      "pub", "tiny"])
                    self.assertEqual(sorted(os.listdir(m.p("pub", "repo"))),
                                     ["Tiny Q4+K", "big", "empty.txt"])
                    self.assertEqual(sorted(os.listdir(m.p("many"))),
                                     ["f%02d.bin" % i for i in range(5)])
                    # "a/./b.gguf": no "." part, and so a/ holds nothing: an empty
                    # folder (issue 43)
                    self.assertEqual(os.listdir(m.p("a")), [])
                    self.assertEqual(gm.read_file(m.p("README.md")), b"# card\n")
                    self.assertEqual(gm.read_file(m.p("pub", "repo", "empty.txt")), b"")
                    self.assertEqual(gm.read_file(m.p("many", "f04.bin")), b"xxxx")
                    with gm.Mount(TINY) as single:
                        for rel in ("tiny", "pub/repo/Tiny Q4+K"):
                            self.assertEqual(gm.read_file(m.p(rel, "model.gguf")),
                                             gm.read_file(single.p("model.gguf")), rel)
                    self.assertEqual(gm.read_file(m.p("pub", "repo", "big", "model.gguf")),
                                     self.data_of_split(shards))
                    rows = gm.read_file(m.p("models.tsv")).decode().splitlines()
                    self.assertEqual(len(rows), 1 + 3, rows)
                    self.assertIn("left out", m.stderr())
                self.assert_all_signed(s)
                tokens = [q for q in s.s3.lists if "continuation-token=" in q]
                self.assertTrue(tokens, "the listings came in pages")
                self.assertTrue(any("%2B" in q or "%2F" in q for q in tokens), tokens)
                # a prefix of the bucket is a library of its own
                with EnvMount("s3://models/pub/", env=self.env(s)) as m:
                    self.assertEqual(sorted(os.listdir(m.path)),
                                     ["models.json", "models.tsv", "repo"])
                    self.read_tensors_at(m.p("repo", "Tiny Q4+K"))
        finally:
            shutil.rmtree(d)

    def test_listing_that_changes_between_pages(self):
        """Objects added and removed while a folder is listed page by page: each name
        once, the mount right about what it lists."""
        files = {"/models/many/f%02d.bin" % i: b"x" * i for i in range(7)}
        with self.server(files) as s:
            s.s3.page_size = 2

            def change(n):
                if n == 1:   # before the second page
                    s.remove("/models/many/f05.bin")
                    s.swap("/models/many/f00b.bin", b"late")   # before the token: unseen
                    s.swap("/models/many/f06.bin", b"new")     # after it: seen, new
            s.s3.between_pages = change
            with EnvMount("s3://models/many/", env=self.env(s)) as m:
                names = os.listdir(m.path)
                self.assertEqual(len(names), len(set(names)), names)
                self.assertEqual(sorted(n for n in names if n.endswith(".bin")),
                                 ["f00.bin", "f01.bin", "f02.bin", "f03.bin", "f04.bin",
                                  "f06.bin"])
                self.assertEqual(gm.read_file(m.p("f06.bin")), b"new")
            self.assert_all_signed(s)

    def data_of_split(self, shards):
        with gm.Mount(shards[0]) as single:
            return gm.read_file(single.p("model.gguf"))

    def read_tensors_at(self, root):
        a, _ = self.extents["output.weight"]
        got = gm.read_file(os.path.join(root, "tensors", "output.weight"))
        self.assertEqual(got, self.data[a:a + len(got)])

    # ---- credentials ----

    def test_session_token_from_a_profile(self):
        cred = os.path.join(self.home, "creds")
        with open(cred, "w") as f:
            f.write("[default]\naws_access_key_id = nobody\naws_secret_access_key = x\n"
                    "[temp]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                    "aws_session_token = %s\n" % (AKID, SECRET, TOKEN))
        os.chmod(cred, 0o600)
        conf = os.path.join(self.home, "config")
        with open(conf, "w") as f:
            f.write("[profile temp]\nregion = eu-central-1\n")
        with self.server({"/%s/%s" % (BUCKET, KEY): self.data}, token=TOKEN,
                         region="eu-central-1") as s:
            env = aws_env(self.home, AWS_PROFILE="temp", AWS_SHARED_CREDENTIALS_FILE=cred,
                          AWS_CONFIG_FILE=conf, AWS_ENDPOINT_URL=s.url)
            with EnvMount("s3://%s/%s" % (BUCKET, KEY), env=env) as m:
                self.read_tensors(m)
            self.assert_all_signed(s)
            self.assertEqual(set(s.s3.tokens), {TOKEN})
            for names in s.s3.signed_headers:
                self.assertIn("x-amz-security-token", names)
            # the same file readable by others: refused before any request
            os.chmod(cred, 0o644)
            s.clear_log()
            err = self.refused("s3://%s/%s" % (BUCKET, KEY), env)
            self.assertIn("readable by group or others", err)
            self.assertEqual(s.log(), [])

    def test_refusals_in_one_line(self):
        with self.server({"/%s/%s" % (BUCKET, KEY): self.data}) as s:
            name = "s3://%s/%s" % (BUCKET, KEY)

            def check(err, *words):
                for w in words + ("credentials: AWS_ACCESS_KEY_ID", "region us-east-1",
                                  "endpoint " + s.url):
                    self.assertIn(w, err)

            err = self.refused(name, self.env(s, AWS_SECRET_ACCESS_KEY="wrong" + SECRET[5:]))
            check(err, "SignatureDoesNotMatch", name)
            self.assertEqual(s.s3.refused[-1][0], "SignatureDoesNotMatch")
            err = self.refused(name, self.env(s, AWS_ACCESS_KEY_ID="AKIANOBODY"))
            check(err, "InvalidAccessKeyId")
            err = self.refused(name, self.env(s, AWS_REGION="ap-south-1"))
            self.assertIn("is in region us-east-1 (HTTP 400 AuthorizationHeaderMalformed)", err)
            self.assertIn("region ap-south-1 (AWS_REGION)", err)
            err = self.refused("s3://%s/nope.gguf" % BUCKET, self.env(s))
            check(err, "no such key", "NoSuchKey")
            err = self.refused("s3://nobucket/x.gguf", self.env(s))
            check(err, "no such bucket 'nobucket'", "NoSuchBucket")
            err = self.refused(name, self.env(s), ["-o", "s3_anonymous"])
            self.assertIn("AccessDenied", err)
            self.assertIn("credentials: none (-o s3_anonymous)", err)
            s.s3.moved = "eu-west-1"
            err = self.refused(name, self.env(s))
            check(err, "another region, eu-west-1", "PermanentRedirect")
            s.s3.moved = None
            err = self.refused(name, aws_env(self.home, AWS_ENDPOINT_URL=s.url))
            self.assertIn("no AWS credentials", err)
            # a bucket is a library, listed at mount: its refusals are one line too
            err = self.refused("s3://nobucket/", self.env(s))
            check(err, "listing refused (HTTP 404 NoSuchBucket)")
            err = self.refused("s3://%s" % BUCKET, self.env(s, AWS_SECRET_ACCESS_KEY="x"))
            check(err, "SignatureDoesNotMatch")
            # an anonymous bucket is read with no signature at all
            s.s3.anonymous = True
            s.clear_log()
            with EnvMount(name, ["-o", "s3_anonymous"], env=self.env(s)) as m:
                self.read_tensors(m)
            self.assertTrue(s.log())
            self.assertTrue(all("authorization" not in r.headers for r in s.log()))

    def test_endpoint_refused_without_its_credentials(self):
        """An endpoint with user:password@ or a query is refused naming it as every URL
        is shown: without the credentials and the query (issue 37, item 14)."""
        for endpoint, hidden in (("http://alice:Pa55w0rdSecret@127.0.0.1:9/", "Pa55w0rdSecret"),
                                 ("http://127.0.0.1:9/?X-Amz-Signature=QuerySecret",
                                  "QuerySecret")):
            env = aws_env(self.home, AWS_ACCESS_KEY_ID=AKID, AWS_SECRET_ACCESS_KEY=SECRET,
                          AWS_ENDPOINT_URL=endpoint)
            for name in ("s3://%s/%s" % (BUCKET, KEY), "s3://%s/" % BUCKET):
                err = self.refused(name, env)
                self.assertIn("the endpoint 'http://127.0.0.1:9/' is not", err)
                self.assertNotIn(hidden, err)
                self.assertNotIn("alice", err)

    def test_secret_shown_nowhere(self):
        with self.server({"/%s/%s" % (BUCKET, KEY): self.data}, token=TOKEN) as s, \
                FaultServer({"/%s/%s" % (BUCKET, KEY): self.data}, host="127.0.0.2") as other:
            cache = tempfile.mkdtemp(prefix="ggufs-s3-cache-")
            log = os.path.join(self.home, "ggufs.log")
            name = "s3://%s/%s" % (BUCKET, KEY)
            env = self.env(s, AWS_SESSION_TOKEN=TOKEN)
            try:
                with EnvMount(name, ["-o", "cache_dir=%s,log=%s" % (cache, log)], env=env) as m:
                    self.read_tensors(m)
                    url = os.getxattr(m.path, "user.ggufs.url").decode()
                    self.assertEqual(url, name)
                    with open("/proc/%d/cmdline" % m.proc.pid, "rb") as f:
                        cmdline = f.read()
                    with open("/proc/mounts") as f:
                        mounts = f.read()
                    for value in (SECRET, TOKEN):
                        self.assertNotIn(value.encode(), cmdline)
                        self.assertNotIn(value, mounts)
                    err_text = m.stderr()
                stored = b""
                for d, _, names in os.walk(cache):
                    for n in names:
                        with open(os.path.join(d, n), "rb") as f:
                            stored += f.read()
                self.assertGreater(len(stored), 0)
                with open(log, "rb") as f:
                    stored += f.read()
                for value in (SECRET, TOKEN):
                    self.assertNotIn(value.encode(), stored)
                    self.assertNotIn(value, err_text)
                # the endpoint redirects elsewhere: a mount follows, and neither the
                # signature nor the token goes there
                s.redirect_to = other.url
                with EnvMount(name, env=env) as m:
                    self.read_tensors(m, ("output_norm.weight",))
                seen = other.log()
                self.assertTrue(seen)
                for r in seen:
                    self.assertNotIn("authorization", r.headers)
                    self.assertNotIn("x-amz-security-token", r.headers)
            finally:
                shutil.rmtree(cache, ignore_errors=True)

    # ---- faults ----

    def test_faults(self):
        path = "/%s/%s" % (BUCKET, KEY)
        with self.server({path: self.data}) as s:
            with EnvMount("s3://%s/%s" % (BUCKET, KEY), ["-o", "timeout=5"], env=self.env(s)) as m:
                s.fail_next(2, 503)
                s.fail_next(1, 500)
                self.read_tensors(m, ("blk.0.attn_q.weight",))
                self.assertGreaterEqual(int(os.getxattr(m.path, "user.ggufs.retries")), 3)
                s.reset_next(2, after=70000)
                self.read_tensors(m, ("blk.1.attn_k.weight",))
                self.assertIn(503, [r.status for r in s.log()])
            # overwritten during the read: EIO, never bytes of the new object
            by_offset = sorted(self.extents, key=lambda n: self.extents[n][0])
            with EnvMount("s3://%s/%s" % (BUCKET, KEY), env=self.env(s)) as m:
                # a small read with O_DIRECT: no read-ahead reaches the last tensor
                start = self.extents[by_offset[0]][0]
                err, got, _ = read_bounded(m.p("tensors", by_offset[0]), 0, 4096, EIO_TIMEOUT)
                self.assertEqual((err, got), (0, self.data[start:start + 4096]))
                s.swap(path, self.data[:start] + bytes(b ^ 0xFF for b in self.data[start:]))
                late = by_offset[-1]
                err, got, _ = read_bounded(m.p("tensors", late), 0,
                                           os.path.getsize(m.p("tensors", late)), EIO_TIMEOUT)
                self.assertEqual(err, errno.EIO, "%d bytes of the new object" % len(got))
                self.assertIn(412, [r.status for r in s.log()])
                self.assertIn("changed on the server", m.stderr())
            # at mount: SlowDown for ever is retried, then said in one line
            s.fail_next(50, 503)
            err = self.refused("s3://%s/%s" % (BUCKET, KEY), self.env(s), ["-o", "timeout=1"])
            self.assertIn("HTTP 503 SlowDown", err)
            self.assertIn("attempts", err)
            s.clear_failures()


if __name__ == "__main__":
    gm.main()
