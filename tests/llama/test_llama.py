#!/usr/bin/env python3
"""llama.cpp itself loads model.gguf (issue 18), through node-llama-cpp (tests/llama/
package.json, installed with `npm ci` there): the bundled model from a local mount, from
nginx by URL and through hf:// with HF_ENDPOINT, and split in 3 (local and by URL),
and s3:// from s3rver (a real S3 implementation, tests/s3rver), each with mmap and with
--no-mmap's reads. Every load's greedy completion of a fixed
prompt is exactly the tokens that loading the original file gives. A mount with
-o edits=FILE whose tokenizer.chat_template was rewritten (issue 19) loads too, reports
the new template, and completes with the same tokens. So does model.gguf of a model
directory inside a library (issue 26), a local folder and a hub repository.

Without node or the installed package the test is skipped (77), except where
GGUFS_REQUIRE_LLAMA is set (CI sets it): there it fails."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
from remote_common import (TINY, EnvMount, Nginx, env_without_token, gm,  # noqa: E402
                           served_root)
from s3rver import S3rver  # noqa: E402

GREEDY = os.path.join(HERE, "greedy.mjs")
NODE_TIMEOUT = 120


def node_ready():
    """Why llama.cpp cannot run here, or None when it can."""
    if not shutil.which("node"):
        return "node is not installed"
    if not os.path.isdir(os.path.join(HERE, "node_modules", "node-llama-cpp")):
        return "node-llama-cpp is not installed (npm ci in tests/llama)"
    return None


def greedy(paths, *flags):
    """The JSON lines of greedy.mjs over paths (one node process for all)."""
    r = subprocess.run(["node", GREEDY] + list(flags) + list(paths), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=NODE_TIMEOUT,
                       cwd=HERE)
    if r.returncode != 0:
        raise AssertionError("node failed (%d): %s" % (r.returncode, r.stderr.decode(errors="replace")))
    return [json.loads(line) for line in r.stdout.decode().splitlines() if line.startswith("{")]


class LlamaCase(unittest.TestCase):
    """What the llama tests share: start(reference) takes the tokens that loading the
    reference file gives (the same with mmap and without) and serves cls.root by nginx
    (cls.nginx, stopped with cls.root removed after the class); check_loads(paths), that
    loading every path gives those tokens."""

    @classmethod
    def start(cls, reference):
        base = greedy([reference], "--both")
        cls.tokens = base[0]["tokens"]
        assert len(cls.tokens) == 8 and base[1]["tokens"] == cls.tokens, base
        cls.nginx = Nginx(cls.root).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.nginx.__exit__(None, None, None)
        shutil.rmtree(cls.root, ignore_errors=True)

    def check_loads(self, paths):
        """Loads every path, with mmap and without: the reference's tokens."""
        got = greedy(paths, "--both")
        self.assertEqual(len(got), 2 * len(paths))
        for g in got:
            self.assertEqual(g["tokens"], self.tokens, g)


class In:
    """A model directory rel of a library mount m, as check takes a mount."""

    def __init__(self, m, *rel):
        self.m, self.rel = m, rel

    def p(self, name):
        return self.m.p(*self.rel, name)


class Llama(LlamaCase):
    @classmethod
    def setUpClass(cls):
        cls.root, _, cls.shards = served_root()
        cls.start(TINY)

    def check(self, mounts):
        """Loads model.gguf of every mount, with mmap and without: the original's tokens."""
        self.check_loads([m.p("model.gguf") for m in mounts])

    def test_local_and_split(self):
        with gm.Mount(TINY) as a, gm.Mount(self.shards[1]) as b:
            self.check([a, b])

    def test_library(self):
        """model.gguf of models inside a library (issue 26): a single file in a nested
        folder, with FUSE passthrough where the kernel offers it (issue 30), and the
        split set, each a directory of the library of split/ and models/."""
        with gm.Mount(self.root) as lib:
            single, split = In(lib, "models", "tinyllama-q4km"), In(lib, "split", "tiny")
            why = os.getxattr(single.p("model.gguf"), "user.ggufs.passthrough").decode()
            if not why.startswith("the kernel"):   # else a kernel without passthrough
                self.assertEqual(why, "yes")
            self.assertEqual(os.getxattr(split.p("model.gguf"), "user.ggufs.passthrough"),
                             b"a split model, merged here")
            self.check([single, split])

    def test_hub_library(self):
        """model.gguf of models inside a hub library (issue 26): the file and the split
        set of a repository served by HubServer, pinned to its commit."""
        from hub_server import HubServer

        files = {"tinyllama-q4km.gguf": gm.read_file(TINY)}
        for p in self.shards:
            files["split/" + os.path.basename(p)] = gm.read_file(p)
        with HubServer("owner/repo") as hub:
            hub.commit(files=files)
            env = env_without_token(HF_ENDPOINT=hub.url)
            with EnvMount("hf://owner/repo", env=env) as lib:
                self.check([In(lib, "tinyllama-q4km"), In(lib, "split", "tiny")])

    def test_edited(self):
        template = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
        with tempfile.TemporaryDirectory() as d:
            with gm.Mount(TINY, ["-o", "edits=" + os.path.join(d, "fix.json")]) as m:
                with open(m.p("metadata", "tokenizer.chat_template"), "w") as f:
                    f.write(template + "\n")
                got = greedy([m.p("model.gguf")], "--both")
        self.assertEqual(len(got), 2)
        for g in got:
            self.assertEqual(g["chat_template"], template)
            self.assertEqual(g["tokens"], self.tokens, g)

    def test_remote(self):
        url = self.nginx.url
        env = env_without_token(HF_ENDPOINT=url)
        with EnvMount(url + "/models/tinyllama-q4km.gguf") as a, \
                EnvMount("hf://owner/repo/tinyllama-q4km.gguf", env=env) as b, \
                EnvMount(url + "/split/tiny-00003-of-00003.gguf") as c:
            self.check([a, b, c])

    def test_s3(self):
        gm.require(self, "s3rver", S3rver.missing())
        with S3rver(["models"]) as s:
            s.put("models", "tiny/tinyllama-q4km.gguf", gm.read_file(TINY))
            for p in self.shards:
                s.put("models", "split/" + os.path.basename(p), gm.read_file(p))
            env = s.env(self.root)
            with EnvMount("s3://models/tiny/tinyllama-q4km.gguf", env=env) as a, \
                    EnvMount("s3://models/split/tiny-00002-of-00003.gguf", env=env) as b:
                self.check([a, b])


if __name__ == "__main__":
    gm.main("llama", node_ready())
