#!/usr/bin/env python3
"""ggufs --diff by URL, on the fault server: the report of two remote models is the
local one's, byte for byte; only the compared tensors' bytes are fetched (a tensor of A
that B has not is never asked for) and none twice; and a server that stalls once the
headers are in makes the comparison fail within the documented bound, with exit 3 and
one line naming the tensor that could not be read.

Run as `python3 test_diff.py GGUFS DIFF_PAIR`."""
import os
import re
import subprocess
import threading
import time

from remote_common import (EIO_TIMEOUT, TINY, FaultServer, gm, tensor_extents,
                           write_noise_model)

BLOCK = 128 << 10        # the man page's fetch block (REMOTE_BLOCK_SIZE), aligned in the file
FIRST_BYTES = 1 << 20    # the first request of a remote model (REMOTE_FIRST_BYTES)


def ranges(records, path):
    """The byte ranges [a, b) of the answered range requests for path."""
    out = []
    for r in records:
        if r.path.partition("?")[0] != path or r.status != 206:
            continue
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", r.range or "")
        out.append((int(m.group(1)), int(m.group(2)) + 1))
    return out


class Remote(gm.PairsCase):
    PAIRS = {"b16": ("b16v.gguf", ["f16", "--vary"])}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.files = {"/a.gguf": gm.read_file(TINY), "/b.gguf": gm.read_file(cls.b16)}

    def test_same_report_fetching_only_what_is_compared(self):
        want = gm.run_ggufs(["--diff", TINY, self.b16])
        self.assertEqual(want.returncode, 0, want.stderr)
        with FaultServer(self.files) as s:
            got = gm.run_ggufs(["--diff", s.url + "/a.gguf", s.url + "/b.gguf"], timeout=120)
            self.assertEqual(got.returncode, 0, got.stderr)
            self.assertEqual(got.stderr, b"")
            self.assertEqual(got.stdout, want.stdout)
            log = s.log()
        # TINY's largest tensor is not in B (diff_pair --vary): none of its bytes is
        # fetched but what the first request (the header's) and the fetch blocks of its
        # neighbours hold
        lo, hi = max(tensor_extents(TINY).values(), key=lambda e: e[1] - e[0])
        asked = ranges(log, "/a.gguf")
        self.assertTrue(asked)
        lo = max(lo, FIRST_BYTES)
        self.assertGreater(hi - lo, 4 * BLOCK)
        inside = sum(max(0, min(b, hi) - max(a, lo)) for a, b in asked)
        self.assertLessEqual(inside, 2 * BLOCK, "fetched %d bytes of the unpaired tensor" % inside)
        for path in ("/a.gguf", "/b.gguf"):   # each byte at most once
            spans = sorted(ranges(log, path))
            for (a0, b0), (a1, b1) in zip(spans, spans[1:]):
                self.assertLessEqual(b0, a1, "%s: %d-%d fetched twice" % (path, a1, b0))

    def test_renamed_tensors_are_not_fetched(self):
        """Tensors that do not pair (renamed in B), between compared ones: the read-ahead
        of neither file fetches a byte of them, beyond the fetch blocks they share with
        a compared tensor (issue 38: 6 of 21 renamed fetched 1.30 x what was compared)."""
        shapes = [("t%02d.weight" % i, (1024, 512)) for i in range(12)]   # 2 MiB each
        a = os.path.join(self.tmp, "a.gguf")
        write_noise_model(a, shapes, 7)
        data = gm.read_file(a)
        renamed = {"t02", "t03", "t06", "t07", "t09", "t10"}
        b = data
        for n in renamed:   # the same length: every offset stays
            b = b.replace(n.encode() + b".weight", n.upper().encode() + b".weight", 1)
        want = gm.run_ggufs(["--diff", a, a])
        self.assertEqual(want.returncode, 0, want.stderr)
        with FaultServer({"/a.gguf": data, "/b.gguf": b}) as s:
            got = gm.run_ggufs(["--diff", s.url + "/a.gguf", s.url + "/b.gguf"], timeout=120)
            self.assertEqual(got.returncode, 0, got.stderr)
            log = s.log()
        self.assertEqual(got.stdout.count(b"\nonly_a\t"), len(renamed))
        extents = tensor_extents(a)
        for path in ("/a.gguf", "/b.gguf"):
            asked = ranges(log, path)
            self.assertTrue(asked)
            for n in renamed:
                lo, hi = extents[n + ".weight"]
                lo = max(-(-lo // BLOCK) * BLOCK, FIRST_BYTES)   # whole blocks of it only
                hi = hi // BLOCK * BLOCK
                inside = sum(max(0, min(y, hi) - max(x, lo)) for x, y in asked)
                self.assertEqual(inside, 0, "%s: fetched %d bytes of %s" % (path, inside, n))

    def test_stalled_server(self):
        """The server stalls once both headers are in: EIO within the bound, one line
        naming a tensor and the fetch that failed, exit 3, nothing on stdout."""
        with FaultServer(self.files) as s:
            s.rate = 256 * 1024   # slow enough that the tensors are still to come
            p = subprocess.Popen([gm.GGUFS, "--diff", "-o", "timeout=2", s.url + "/a.gguf",
                                  s.url + "/b.gguf"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            t0 = time.monotonic()
            deadline = t0 + 30
            while time.monotonic() < deadline and p.poll() is None:
                if any(r.path == "/b.gguf" and r.status == 206 for r in s.log()):
                    break
                time.sleep(0.005)
            s.stall = True
            try:
                out, err = p.communicate(timeout=EIO_TIMEOUT)
            finally:
                s.stall = False
            took = time.monotonic() - t0
        self.assertEqual(p.returncode, 3, err)
        self.assertEqual(out, b"")
        lines = err.decode().splitlines()
        self.assertEqual(len(lines), 1, err)
        # the fetcher's cause in the same line, which names the file once (both models'
        # fetches fail; the cause is the failed model's own)
        m = re.match(r"^ggufs: (http://127\.0\.0\.1:\d+/[ab]\.gguf): tensor '[^']+': "
                     r"cannot read: (.*)$", lines[0])
        self.assertIsNotNone(m, lines[0])
        self.assertRegex(m.group(2), r"^bytes \d+-\d+ could not be fetched after \d+ "
                         r"attempts.*-o timeout=2.*EIO$")
        self.assertEqual(lines[0].count("127.0.0.1"), 1)
        self.assertLess(took, EIO_TIMEOUT)


if __name__ == "__main__":
    gm.main(diff_pair=True)
