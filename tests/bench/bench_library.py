#!/usr/bin/env python3
"""A library's speed and memory (issue 26), printed, never asserted: `meson test
--benchmark`.

    python3 bench_library.py GGUFS_BINARY

1. a folder of 1,000 local models (the bundled model, hard-linked, so it costs no
   disk): the mount and the first `ls -l` of the library (a listing and a stat of every
   name) against `ls -l` of the folder itself (target: about the same: no model is
   opened), and reading one model's summary.txt against a single mount of that file;
2. the daemon's RSS (VmRSS, and RssAnon) after every model's summary.txt was read once
   (target: bounded by the 8 models kept built, not by the library);
3. models.tsv of a 25-model hub library (HubServer) at 25 MB/s and 50 ms per connection,
   each model a copy of the bundled one, from a fresh mount (8 headers at a time)."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mount"))
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
import ggufs_mount as gm  # noqa: E402
from remote_common import EnvMount, env_without_token  # noqa: E402
from hub_server import HubServer  # noqa: E402

N_LOCAL = 1000
N_HUB = 25


def ls_l(path):
    """What `ls -l` does: the listing, then a stat of every name. Its time in s."""
    t = time.monotonic()
    for name in os.listdir(path):
        os.stat(os.path.join(path, name))
    return time.monotonic() - t


def local(tmp):
    src = os.path.join(tmp, "models")
    os.mkdir(src)
    for i in range(N_LOCAL):
        os.link(gm.TINY, os.path.join(src, "model-%04d.gguf" % i))
    folder = min(ls_l(src) for _ in range(3))
    t = time.monotonic()
    with gm.Mount(src) as m:
        mounted = time.monotonic() - t
        first = ls_l(m.path)
        opened = int(os.getxattr(m.path, "user.ggufs.models_opened"))
        t = time.monotonic()
        gm.read_file(m.p("model-0000", "summary.txt"))
        one = time.monotonic() - t
        for i in range(N_LOCAL):
            gm.read_file(m.p("model-%04d" % i, "summary.txt"))
        rss, anon = (gm.proc_status(m.proc.pid, "VmRSS", gone=0) // 1024,
                     gm.proc_status(m.proc.pid, "RssAnon", gone=0) // 1024)
        built = int(os.getxattr(m.path, "user.ggufs.models_built"))
    t = time.monotonic()
    with gm.Mount(os.path.join(src, "model-0000.gguf")) as single:
        gm.read_file(single.p("summary.txt"))
        alone = time.monotonic() - t
    print("library of %d local models: mount %.1f ms, first ls -l %.1f ms (ls -l of the "
          "folder: %.1f ms), models opened by it: %d" % (N_LOCAL, mounted * 1e3, first * 1e3,
                                                         folder * 1e3, opened))
    print("one model's summary.txt in the library: %.1f ms; a single mount of it and the "
          "same read: %.1f ms" % (one * 1e3, alone * 1e3))
    print("after every model's summary.txt once: daemon VmRSS %.1f MiB, RssAnon %.1f MiB, "
          "models built %d" % (rss / 1024, anon / 1024, built))


def hub(tmp):
    repo = os.path.join(tmp, "repo")
    os.mkdir(repo)
    for i in range(N_HUB):
        os.link(gm.TINY, os.path.join(repo, "Tiny-%02d-Q4_K_M.gguf" % i))
    with HubServer("owner/repo") as server:
        server.commit(repo)
        server.rate = 25e6
        server.latency = 0.05
        env = env_without_token(HF_ENDPOINT=server.url)
        t = time.monotonic()
        with EnvMount("hf://owner/repo", env=env) as m:
            mounted = time.monotonic() - t
            t = time.monotonic()
            rows = gm.read_file(m.p("models.tsv")).count(b"\n") - 1
            table = time.monotonic() - t
            t = time.monotonic()
            gm.read_file(m.p("models.tsv"))
            again = time.monotonic() - t
            requests = int(os.getxattr(m.path, "user.ggufs.models_opened"))
    print("hub library of %d models at 25 MB/s + 50 ms per connection: mount %.0f ms, "
          "models.tsv (%d rows) %.0f ms, again %.1f ms, models opened %d"
          % (N_HUB, mounted * 1e3, rows, table * 1e3, again * 1e3, requests))


def main():
    gm.setup()
    tmp = tempfile.mkdtemp(prefix="ggufs-bench-lib-")
    try:
        local(tmp)
        hub(tmp)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
