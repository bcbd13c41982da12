#!/usr/bin/env python3
"""What a server sends in its headers never goes back to it as header lines of its own:
an ETag with a lone CR inside (which would split the If-Match line of every later
request, adding a header the server chose) is dropped, and the mount still serves the
right bytes, pinned by size and Last-Modified."""
import unittest

from remote_common import TINY, EnvMount, FaultServer, gm, tensor_extents

PATH = "/m.gguf"


class Headers(unittest.TestCase):
    def test_etag_with_a_carriage_return(self):
        data = gm.read_file(TINY)
        extents = tensor_extents(TINY)
        with FaultServer({PATH: data}) as s:
            s.files[PATH].etag = '"abc\rX-Injected: 1"'
            with EnvMount(s.url + PATH) as m:
                for name in ("output.weight", "blk.1.ffn_down.weight"):
                    a, _ = extents[name]
                    got = gm.read_file(m.p("tensors", name))
                    self.assertGreater(len(got), 0)
                    self.assertEqual(got, data[a:a + len(got)], name)
            log = s.log_settled(2)
        self.assertGreater(len(log), 1)
        for r in log:
            names = [k.lower() for k in r.headers.keys()]
            self.assertNotIn("x-injected", names, r)
            self.assertNotIn("if-match", names, r)


if __name__ == "__main__":
    gm.main()
