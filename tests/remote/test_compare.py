#!/usr/bin/env python3
"""A remote mount equals a local mount of the same file, file by file: names, modes,
sizes, bytes and xattrs everywhere; only gguf.json's "file" and summary.txt's file and
source lines may differ. Served by nginx over http and https (-o cafile), through
hf:// with HF_ENDPOINT (main and @REVISION, with a sub-directory), for the bundled
model, the type vectors, and a split model mounted from shard 2's URL."""
import json
import os
import shutil
import unittest

from remote_common import (ALLTYPES, TINY, EnvMount, Nginx, compare_mounts, env_without_token,
                           gm, install, proc_mounts_line, served_root)


class Compare(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root, cls.tiny, cls.shards = served_root()
        cls.alltypes = install(ALLTYPES, cls.root, "vectors/alltypes.gguf")
        install(TINY, cls.root, "owner/repo/resolve/0123abc/sub/dir/tinyllama-q4km.gguf")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)

    def check(self, local_path, url, opts=(), env=None, source_words=None, name=None):
        """Mounts local_path and url side by side and compares them; the remote root's
        mtime is Last-Modified, which nginx takes from the file (whole seconds).
        name: gguf.json's "file", by default the URL's last path component."""
        name = name or url.rsplit("/", 1)[1]
        with gm.Mount(local_path) as local, EnvMount(url, opts, env) as remote:
            compare_mounts(self, local.path, remote.path, name, source_words or [url])
            self.assertEqual(int(os.stat(remote.path).st_mtime), int(os.stat(local_path).st_mtime))
            fsname = proc_mounts_line(remote.path).split()[0]
            self.assertEqual(fsname, url)
            self.assertEqual(remote.stderr(), "")

    def test_tinyllama_http(self):
        with Nginx(self.root) as n:
            self.check(self.tiny, n.url + "/models/tinyllama-q4km.gguf")
            self.assertTrue(all(r.status == 206 and r.range for r in n.records_settled(1)),
                            "every request is a range request")

    def test_tinyllama_https(self):
        with Nginx(self.root, https=True) as n:
            self.check(self.tiny, n.url + "/models/tinyllama-q4km.gguf", ["-o", "cafile=" + n.cafile])

    def test_alltypes_http(self):
        with Nginx(self.root) as n:
            self.check(self.alltypes, n.url + "/vectors/alltypes.gguf")

    def test_check_by_url(self):
        """ggufs --check takes a URL (and the remote -o options) and reports what it
        reports for the local file, figure for figure."""
        with Nginx(self.root, https=True) as n:
            url = n.url + "/vectors/alltypes.gguf"
            got = gm.run_ggufs(["--check", "--json", "-o", "cafile=" + n.cafile, url])
            want = gm.run_ggufs(["--check", "--json", self.alltypes])
            self.assertEqual(got.returncode, want.returncode, got.stderr)
            self.assertEqual(got.stderr, b"")
            got, want = json.loads(got.stdout), json.loads(want.stdout)
            self.assertEqual(got.pop("file"), url)
            want.pop("file")
            self.assertEqual(got, want)
            self.assertGreater(len(got["tensors"]), 50)

    def test_hf_main(self):
        with Nginx(self.root) as n:
            url = "hf://owner/repo/tinyllama-q4km.gguf"
            self.check(self.tiny, url, env=env_without_token(HF_ENDPOINT=n.url),
                       source_words=[url, n.url + "/owner/repo/resolve/main/tinyllama-q4km.gguf"])
            paths = {r.path for r in n.records_settled(1)}
            self.assertEqual(paths, {"/owner/repo/resolve/main/tinyllama-q4km.gguf"})

    def test_hf_revision_https(self):
        with Nginx(self.root, https=True) as n:
            url = "hf://owner/repo@0123abc/sub/dir/tinyllama-q4km.gguf"
            resolved = n.url + "/owner/repo/resolve/0123abc/sub/dir/tinyllama-q4km.gguf"
            self.check(self.tiny, url, ["-o", "cafile=" + n.cafile],
                       env=env_without_token(HF_ENDPOINT=n.url), source_words=[url, resolved])
            paths = {r.path for r in n.records_settled(1)}
            self.assertEqual(paths, {"/owner/repo/resolve/0123abc/sub/dir/tinyllama-q4km.gguf"})

    def test_split_from_shard_2(self):
        with Nginx(self.root) as n:
            # gguf.json's "file" names the first shard, whose metadata it shows, as the
            # local mount of the same shard does
            self.check(self.shards[1], n.url + "/split/tiny-00002-of-00003.gguf",
                       name="tiny-00001-of-00003.gguf")
            paths = {r.path for r in n.records_settled(3)}
            self.assertEqual(paths, {"/split/tiny-%05d-of-00003.gguf" % i for i in (1, 2, 3)})

    def test_split_from_shard_3(self):
        """From the last shard too: the remote tree equals the local one, "file"
        included (compare_mounts compares everything else)."""
        with Nginx(self.root) as n:
            url = n.url + "/split/tiny-00003-of-00003.gguf"
            with gm.Mount(self.shards[2]) as local, EnvMount(url) as remote:
                local_json = gm.read_file(local.p("gguf.json"))
                remote_json = gm.read_file(remote.p("gguf.json"))
                self.assertTrue(local_json.startswith(b'{"file": "tiny-00001-of-00003.gguf"'))
                self.assertEqual(remote_json, local_json)


if __name__ == "__main__":
    gm.main()
