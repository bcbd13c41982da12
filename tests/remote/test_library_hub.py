"""A hub repository mounted as a library (issue 26) against HubServer (hub_server.py): the
tree API read page by page (3 entries a page), the revision resolved to a commit once
and every file read at it (the repository changes on the server after mount, the mount
does not), a folder of the repository, models.tsv with the hub's sha256, tokens sent
only to the endpoint, hf://OWNER/REPO:QUANT as one model, a browser's blob URL, and a
hub that refuses the listing, compare/ of two of its models, a quick remount that takes
the old daemon's disk cache entries."""
import calendar
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from remote_common import EnvMount, env_without_token, gm
from hub_server import HubServer

SLOW_CLOSE = None     # the preloaded library of slow_close.c (the second argument)
SLOW_SERVE_MS = 3000  # how long the old daemon's loop goes on past the unmount (its
                      # entries held meanwhile, shared with the new mount)
HEADER_RANGE = "bytes=0-%d" % ((1 << 20) - 1)   # a model's first request (REMOTE_FIRST_BYTES)


def tiny_model(path, arch):
    import struct
    gm.write_gguf(path, [("general.architecture", arch), ("general.name", "n-" + arch)],
                  [("t", [4], gm.GGML_F32, struct.pack("<4f", 0, 1, 2, 3))])


class HubLibrary(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ggufs-hub-")
        self.repo = os.path.join(self.tmp, "repo")
        os.makedirs(os.path.join(self.repo, "sub", "deeper"))
        shutil.copyfile(gm.TINY, os.path.join(self.repo, "Tiny-Q4_K_M.gguf"))
        tiny_model(os.path.join(self.repo, "Tiny-Q8_0.gguf"), "eight")
        tiny_model(os.path.join(self.repo, "sub", "deeper", "Other-F16.gguf"), "other")
        with open(os.path.join(self.repo, "README.md"), "wb") as f:
            f.write(b"# card\n" * 1000)
        self.hub = HubServer("owner/repo").__enter__()
        self.first = self.hub.commit(self.repo)

    def tearDown(self):
        self.hub.__exit__(None, None, None)
        shutil.rmtree(self.tmp)

    def env(self, **extra):
        return env_without_token(HF_ENDPOINT=self.hub.url, **extra)

    def test_library_pinned_and_paged(self):
        with EnvMount("hf://owner/repo", env=self.env()) as m:
            self.assertEqual(sorted(os.listdir(m.path)),
                             ["README.md", "Tiny-Q4_K_M", "Tiny-Q8_0", "models.json",
                              "models.tsv", "sub"])
            self.assertEqual(os.listdir(m.p("sub", "deeper")), ["Other-F16"])
            # every page of the listing was read, each once, at the commit
            trees = [r.path for r in self.hub.log() if "/tree/" in r.path]
            self.assertEqual(len(trees), 2)  # 6 entries, 3 a page: the Link followed once
            self.assertTrue(all(self.first in p for p in trees), trees)
            self.assertEqual(len(trees), len(set(trees)))
            # a model directory equals a single mount of the file, byte for byte
            with EnvMount("hf://owner/repo@%s/Tiny-Q4_K_M.gguf" % self.first,
                          env=self.env()) as single:
                for name in ("model.gguf", "summary.txt", "gguf.json", "tensors/output.weight"):
                    self.assertEqual(gm.read_file(m.p("Tiny-Q4_K_M", name)),
                                     gm.read_file(single.p(name)), name)
            with open(gm.TINY, "rb") as f:
                want = f.read()
            self.assertEqual(gm.read_file(m.p("Tiny-Q4_K_M", "model.gguf")), want)
            # served by the daemon, never passed through (FUSE passthrough: local files)
            self.assertEqual(os.getxattr(m.p("Tiny-Q4_K_M", "model.gguf"),
                                         "user.ggufs.passthrough"), b"a remote library's model")
            self.assertEqual(gm.read_file(m.p("README.md")), b"# card\n" * 1000)
            # the repository changes on the server: the mount keeps its commit
            tiny_model(os.path.join(self.repo, "Tiny-Q8_0.gguf"), "changed")
            os.unlink(os.path.join(self.repo, "README.md"))
            self.hub.commit(self.repo)
            self.assertEqual(gm.read_file(m.p("Tiny-Q8_0", "metadata", "general.architecture")),
                             b"eight\n")
            self.assertIn("README.md", os.listdir(m.path))
            resolves = [r.path for r in self.hub.log() if "/resolve/" in r.path]
            self.assertTrue(resolves and all(self.first in p for p in resolves), resolves)
            # models.tsv: every model, with the hub's sha256
            rows = [l.split("\t") for l in gm.read_file(m.p("models.tsv")).decode().splitlines()]
            self.assertEqual([r[0] for r in rows[1:]],
                             ["Tiny-Q4_K_M", "Tiny-Q8_0", "sub/deeper/Other-F16"])
            self.assertEqual(rows[1][11], hashlib.sha256(want).hexdigest())
            self.assertEqual(rows[2][1], "eight")

    def test_dates(self):
        """Every entry is dated (issue 38 item 13; all were 1970): a file by its last
        commit when the tree listing gives one, everything else (folders, models,
        models.tsv, models.json, the root) by the commit's date, the revision's
        lastModified; a later commit on the server changes no date of the mount."""
        self.hub.commit(self.repo, last_commits={"README.md": "2023-01-02T03:04:05.000Z"})
        commit = calendar.timegm(time.strptime(self.hub.commit_date(1), "%Y-%m-%dT%H:%M:%S.000Z"))
        with EnvMount("hf://owner/repo", env=self.env()) as m:
            self.assertEqual(os.stat(m.p("README.md")).st_mtime, 1672628645)
            for name in ("", "models.tsv", "models.json", "sub", "sub/deeper", "Tiny-Q8_0",
                         "sub/deeper/Other-F16"):
                self.assertEqual(os.stat(m.p(name)).st_mtime, commit, name)
            self.hub.commit(self.repo)
            self.assertEqual(os.stat(m.p("models.tsv")).st_mtime, commit)
        with EnvMount("hf://owner/repo/sub", env=self.env()) as m:
            self.assertEqual(os.stat(m.path).st_mtime, commit + 86400)
            self.assertEqual(os.stat(m.p("deeper")).st_mtime, commit + 86400)

    def test_folder_and_token(self):
        self.hub.token = "sekrit"
        env = self.env(HF_TOKEN="sekrit")
        with EnvMount("hf://owner/repo/sub", env=env) as m:
            self.assertEqual(sorted(os.listdir(m.path)), ["deeper", "models.json", "models.tsv"])
            self.assertEqual(gm.read_file(m.p("deeper", "Other-F16", "metadata",
                                              "general.architecture")), b"other\n")
        for r in self.hub.log():
            self.assertEqual(r.headers.get("authorization"), "Bearer sekrit", r.path)
        # without the token: one line at mount, nothing mounted
        self.assertIn("401", self.refused_line(["hf://owner/repo"]))

    def refused_line(self, args, timeout=gm.MOUNT_TIMEOUT, **extra):
        """The one line a mount of args (a mount point added) says, refused: run as
        run_env runs it, exit status 1, one line on stderr, nothing mounted."""
        mnt = os.path.join(self.tmp, "mnt")
        os.makedirs(mnt, exist_ok=True)
        r = self.run_env(list(args) + [mnt], timeout, **extra)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.decode().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertFalse(gm.is_mounted(mnt))
        return lines[0]

    def run_env(self, args, timeout=gm.MOUNT_TIMEOUT, **extra):
        """ggufs ARGS run to its end in self.env(**extra) alone."""
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env(**extra))
        try:
            return gm.run_ggufs(args, timeout=timeout)
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def test_refusals(self):
        mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(mnt)
        for status in (404, 429, 503):
            with self.subTest(status=status):
                self.hub.fail_next(50, status)
                try:
                    line = self.refused_line(["-o", "timeout=2", "hf://owner/repo"])
                finally:
                    self.hub.clear_failures()
                self.assertIn(str(status), line)
        r = self.run_env(["hf://owner/nothere", mnt])
        self.assertEqual(r.returncode, 1)
        self.assertIn("404", r.stderr.decode())
        r = self.run_env(["-o", "edits=" + os.path.join(self.tmp, "e.json"), "hf://owner/repo", mnt])
        self.assertEqual(r.returncode, 2)
        self.assertFalse(gm.is_mounted(mnt))

    def test_next_page_elsewhere_refused(self):
        """A page whose Link names another origin (which the token would follow) ends
        the mount with one line; the other server hears nothing."""
        from fault_server import FaultServer
        with FaultServer({}, host="127.0.0.2") as other:
            page = "/api/models/owner/repo/tree/%s?recursive=true" % self.first
            body = self.hub.file(page).slice(0, len(self.hub.file(page).content)).tobytes()
            self.hub.swap(page, body, [("Link", '<%s%s&cursor=1>; rel="next"' % (other.url, page))])
            self.hub.token = "sekrit"
            self.assertIn("next page", self.refused_line(["hf://owner/repo"], HF_TOKEN="sekrit"))
            self.assertEqual(other.log(), [])

    def test_names_longer_than_255_bytes_left_out(self):
        """A path with a part longer than a name may be is left out with a log line
        (issue 37, item 12): listed, it could never be looked up."""
        fits = "b" * 250 + ".gguf"
        files = {"a" * 251 + ".gguf": gm.read_file(gm.TINY), fits: gm.read_file(gm.TINY),
                 "d" * 256 + "/x.txt": b"x", "ok.txt": b"ok"}
        self.hub.commit(files=files)
        with EnvMount("hf://owner/repo", env=self.env()) as m:
            self.assertEqual(sorted(os.listdir(m.path)),
                             ["b" * 250, "models.json", "models.tsv", "ok.txt"])
            rows = gm.read_file(m.p("models.tsv")).decode().splitlines()
            self.assertEqual([r.split("\t")[0] for r in rows[1:]], ["b" * 250])
            self.assertIn("longer than 255 bytes", m.stderr())

    def test_pages_without_end_refused(self):
        """A listing whose pages never end stops at the page cap with one line, and
        leaks nothing there (issue 37, item 13: the next page's URL was kept; the
        sanitizer build's leak check fails the mount's exit otherwise)."""
        base = "/api/models/owner/repo/tree/%s?recursive=true" % self.first
        for k in range(10001):
            key = base + ("&cursor=%d" % k if k else "")
            self.hub.swap(key, b"[]", [("Link", '<%s%s&cursor=%d>; rel="next"'
                                        % (self.hub.url, base, k + 1))])
        # 10,000 requests, one connection each: minutes allowed under a sanitizer
        self.assertIn("more than 10000 pages",
                      self.refused_line(["hf://owner/repo@%s" % self.first], timeout=300))

    def test_compare(self):
        """compare/ of a hub library: listed without fetching the other model, read as
        ggufs --diff of the two files at the commit."""
        with EnvMount("hf://owner/repo", env=self.env()) as m:
            self.assertEqual(os.listdir(m.p("Tiny-Q4_K_M", "compare")), ["Tiny-Q8_0"])
            self.assertEqual(os.listdir(m.p("sub", "deeper", "Other-F16", "compare")), [])
            self.assertFalse([r.path for r in self.hub.log() if "Tiny-Q8_0" in r.path])
            got = gm.read_file(m.p("Tiny-Q4_K_M", "compare", "Tiny-Q8_0"))
        at = "hf://owner/repo@%s/" % self.first
        r = self.run_env(["--diff", at + "Tiny-Q4_K_M.gguf", at + "Tiny-Q8_0.gguf"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(got, r.stdout)
        self.assertIn(b"only_a\toutput.weight", got)

    def test_check(self):
        r = self.run_env(["--check", "hf://owner/repo"])
        self.assertEqual(r.returncode, 0, r.stderr)
        blocks = r.stdout.decode().split("\n\n")
        self.assertEqual(len(blocks), 3, blocks)
        self.assertTrue(blocks[0].startswith("hf://owner/repo@%s/Tiny-Q4_K_M.gguf: " % self.first),
                        blocks[0])

    def test_check_reads_what_the_mount_serves(self):
        """--check hf://OWNER/REPO checks the files the mount serves, fetched by the
        library's own escaped URLs at its commit: a name holding %2F.. is not read as
        a path that climbs, and names with spaces, '?' or '#' are checked, not refused."""
        odd = ["pct%2F..%2Fz.gguf", "with space.gguf", "q?x.gguf", "h#x.gguf"]
        files = {}
        for k, name in enumerate(odd):
            tiny_model(os.path.join(self.tmp, "m.gguf"), "odd%d" % k)
            with open(os.path.join(self.tmp, "m.gguf"), "rb") as f:
                files[name] = f.read()
        sha = self.hub.commit(files=files)

        def fetched():
            # a request is logged once its answer is written: the client may be ahead
            self.hub.quiet()
            return sorted({r.path for r in self.hub.log() if "/resolve/" in r.path})
        with EnvMount("hf://owner/repo", env=self.env()) as m:
            for name in odd:
                self.assertEqual(gm.read_file(m.p(name[:-5], "metadata", "general.architecture")),
                                 b"odd%d\n" % odd.index(name))
            served = fetched()
        self.assertEqual(len(served), len(odd), served)
        self.hub.clear_log()
        r = self.run_env(["--check", "hf://owner/repo"])
        self.assertEqual(r.returncode, 0, r.stderr)
        ok = [b for b in r.stdout.decode().split("\n\n") if "tensors checked" in b]
        self.assertEqual(len(ok), len(odd), r.stdout)
        for name in odd:
            self.assertTrue(any(b.startswith("hf://owner/repo@%s/%s: " % (sha, name))
                                for b in ok), (name, ok))
        # the very URLs the mount fetched, and no other
        self.assertEqual(fetched(), served)

    def test_cache_dir_none(self):
        """-o cache_dir=none keeps no disk cache for a hub library's models, as for any
        remote model (it kept one in a folder called "none" of the working directory:
        /none for a mount, which works in "/")."""
        cwd = os.getcwd()
        work = os.path.join(self.tmp, "cwd")
        os.mkdir(work)
        os.chdir(work)
        try:
            r = self.run_env(["--check", "-o", "cache_dir=none", "hf://owner/repo"])
        finally:
            os.chdir(cwd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(work), [])
        # a mount: while a model is built, the daemon holds no file of a disk cache
        with EnvMount("hf://owner/repo", ["-o", "cache_dir=none"], env=self.env()) as m:
            self.assertEqual(gm.read_file(m.p("Tiny-Q8_0", "metadata", "general.architecture")),
                             b"eight\n")
            fds = "/proc/%d/fd" % m.proc.pid
            held = [os.readlink(os.path.join(fds, f)) for f in os.listdir(fds)]
            self.assertFalse([h for h in held if "/none/" in h or h.endswith("/none")], held)

    def test_quick_remount_keeps_the_cache(self):
        """Unmounted and at once mounted again while the old daemon still holds its disk
        cache entries (its loop returns SLOW_SERVE_MS after the unmount: slow_close
        preloaded in it): the new mount shares them at once, saying nothing of the disk
        cache, and reads the model from them (nothing past its header fetched again)."""
        if not SLOW_CLOSE:
            self.skipTest("no slow_close library given")
        cache = os.path.join(self.tmp, "cache")
        opts = ["-o", "cache_dir=" + cache]
        slow = self.env(LD_PRELOAD=SLOW_CLOSE, GGUFS_SLOW_SERVE_MS=str(SLOW_SERVE_MS),
                        ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") +
                        ":verify_asan_link_order=0")
        with open(gm.TINY, "rb") as f:
            want = f.read()
        model = ("Tiny-Q4_K_M", "model.gguf")
        old = EnvMount("hf://owner/repo", opts, env=slow).__enter__()
        try:
            self.assertEqual(gm.read_file(old.p(*model)), want)
            self.hub.quiet()
            self.hub.clear_log()
            subprocess.run(["fusermount3", "-u", old.path], check=True)
            with EnvMount("hf://owner/repo", opts, env=self.env()) as new:
                self.assertIsNone(old.proc.poll(), "the old daemon exited before the read")
                self.assertEqual(gm.read_file(new.p(*model)), want)
                self.assertNotIn("disk cache", new.stderr())
            fetched = [(r.path, r.range) for r in self.hub.log()
                       if r.path.endswith("/Tiny-Q4_K_M.gguf") and r.range != HEADER_RANGE]
            self.assertEqual(fetched, [])
        finally:
            old.__exit__(None, None, None)

    def test_quant_and_blob(self):
        with EnvMount("hf://owner/repo:q8_0", env=self.env()) as m:
            self.assertEqual(gm.read_file(m.p("metadata", "general.architecture")), b"eight\n")
            self.assertIn(self.first, m.stderr())
        line = self.refused_line(["hf://owner/repo:IQ2_XS"])
        for tag in ("Q4_K_M", "Q8_0", "F16"):
            self.assertIn(tag, line)
        blob = "%s/owner/repo/blob/%s/Tiny-Q8_0.gguf" % (self.hub.url, self.first)
        with EnvMount(blob, env=self.env()) as m:
            self.assertEqual(gm.read_file(m.p("metadata", "general.architecture")), b"eight\n")
            self.assertIn("resolve", m.stderr())


if __name__ == "__main__":
    if len(sys.argv) > 2 and os.path.isfile(sys.argv[2]):
        SLOW_CLOSE = os.path.abspath(sys.argv.pop(2))
    gm.main()
