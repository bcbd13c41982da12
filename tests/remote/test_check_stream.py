#!/usr/bin/env python3
"""`ggufs --check URL` on a server that ignores Range requests (issue 29 item 7): the
check reads the file in order, so it is streamed (one plain GET after the refused range
request) instead of refused:
- the report, text and --json, is the local file's, for the Q4_K_M model and for a
  model larger than the stream's 64 MiB window whose tensors' bytes lie in the file in
  the reverse of the header's order;
- the server is asked twice: the range request (answered 200) and the stream;
- a body cut short is one line naming the tensor and the byte where the connection
  ended (exit 3), never a report; an encoded body is refused in one line;
- a mount of the same URL is still refused (a mount reads anywhere: it needs Range)."""
import os
import shutil
import tempfile
import unittest

import numpy

from remote_common import TINY, FaultServer, gm

MIB = 1 << 20


class CheckStream(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ggufs-check-stream-")
        rng = numpy.random.default_rng(29)
        values = [rng.standard_normal(n, dtype=numpy.float32) for n in (9 * MIB, 12 * MIB, 3 * MIB)]
        values[1][12345] = numpy.nan    # one unhealthy tensor, so the report says something
        cls.big = os.path.join(cls.dir, "big.gguf")
        # the tensors' data lie in the file last first
        gm.write_gguf(cls.big, [("general.architecture", "llama")],
                      [(name, [v.size], gm.GGML_F32, v.tobytes())
                       for name, v in zip("abc", values)], order=(2, 1, 0))
        cls.big_data = gm.read_file(cls.big)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def check(self, model, *args):
        r = gm.run_ggufs(["--check", *args, model], timeout=300)
        return r.returncode, r.stdout.decode(), r.stderr.decode()

    def same_report(self, local, data):
        with FaultServer({"/m.gguf": data}) as s:
            s.ignore_range = True
            url = s.url + "/m.gguf"
            for args in ((), ("--json",)):
                want = self.check(local, *args)
                got = self.check(url, *args)
                self.assertEqual(got[2], "", "nothing on stderr")
                self.assertEqual(got[0], want[0], got)
                self.assertEqual(got[1].replace(url, "MODEL"), want[1].replace(local, "MODEL"))
                self.assertTrue(want[1], "a report")
            log = s.log_settled(4)
            self.assertEqual([r.status for r in log], [200] * 4)
            self.assertEqual([bool(r.range) for r in log], [True, False] * 2,
                             "a range request, refused, then one stream: %r" % log)
        return want

    def test_q4_k_m_model(self):
        self.same_report(TINY, gm.read_file(TINY))

    def test_larger_than_the_window_out_of_order(self):
        self.assertGreater(len(self.big_data), 64 * MIB + 32 * MIB)
        status, text, _ = self.same_report(self.big, self.big_data)
        self.assertEqual(status, 1, "the NaN makes b unhealthy")
        self.assertIn("b", text)

    def test_cut_short(self):
        with FaultServer({"/m.gguf": self.big_data}) as s:
            s.ignore_range = True
            s.reset_after = 80 * MIB
            status, out, err = self.check(s.url + "/m.gguf")
        self.assertEqual(status, 3, err)
        self.assertEqual(out, "", "no report")
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertIn("cannot read", lines[0])
        self.assertRegex(lines[0], r"tensor '[abc]'")

    def test_encoded_body(self):
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s:
            s.ignore_range = True
            s.extra_headers = [("Content-Encoding", "gzip")]
            status, out, err = self.check(s.url + "/m.gguf")
        self.assertEqual(status, 3, err)
        self.assertEqual(out, "")
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("Content-Encoding: gzip", err)

    def test_a_mount_still_needs_range(self):
        with FaultServer({"/m.gguf": gm.read_file(TINY)}) as s:
            s.ignore_range = True
            r = gm.run_ggufs([s.url + "/m.gguf", tempfile.mkdtemp(dir=self.dir)])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ignores Range", r.stderr.decode())


if __name__ == "__main__":
    gm.main()
