#!/usr/bin/env python3
"""An hf:// mount stays on the commit it mounted: once the hub names the commit it
served (X-Repo-Commit), every later request asks for resolve/COMMIT/, not the branch, so
the data still comes from the mounted version after the branch has moved on (here: the
branch's file replaced by another of the same size), and summary.txt names the commit."""
import os
import unittest

from remote_common import TINY, EnvMount, FaultServer, env_without_token, gm, tensor_extents

COMMIT = "0123456789abcdef0123456789abcdef01234567"
BRANCH = "/o/r/resolve/main/tinyllama-q4km.gguf"
PINNED = "/o/r/resolve/%s/tinyllama-q4km.gguf" % COMMIT


class Pin(unittest.TestCase):
    def test_later_requests_ask_for_the_commit(self):
        data = gm.read_file(TINY)
        extents = tensor_extents(TINY)
        with FaultServer({BRANCH: data, PINNED: data}) as s:
            s.extra_headers = [("X-Repo-Commit", COMMIT)]
            env = env_without_token(HF_ENDPOINT=s.url)
            with EnvMount("hf://o/r/tinyllama-q4km.gguf", env=env) as m:
                s.swap(BRANCH, bytes(len(data)))   # the branch moves on
                for name in ("output.weight", "blk.1.ffn_down.weight"):
                    a, _ = extents[name]
                    got = gm.read_file(m.p("tensors", name))
                    self.assertGreater(len(got), 0)
                    self.assertEqual(got, data[a:a + len(got)], name)
                summary = gm.read_file(m.p("summary.txt")).decode()
                self.assertIn(COMMIT, summary)
            log = s.log_settled(2)
        self.assertEqual(log[0].path, BRANCH, "the mount asks for the branch")
        self.assertTrue(all(r.path == PINNED for r in log[1:]), [r.path for r in log])
        self.assertGreater(len(log), 1)


if __name__ == "__main__":
    gm.main()
