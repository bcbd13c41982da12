#!/usr/bin/env python3
"""The bundled model cut short, through the command line: at every 4,999th byte of its
header, at each of its first 64 bytes and at 50 offsets in its data section. Each cut
is refused with exit status 1 and exactly one line on stderr naming the file, nothing is
mounted, and no run hangs (10 s asserted: a hang, not a benchmark; a run takes well under
a second, but one took 2.7 s under the sanitizers on a loaded machine).
Every single header offset is covered in-process by the parser's unit tests."""
import json
import os
import random
import shutil
import time

import ggufs_mount as gm

LIMIT = 10.0


def data_offset():
    with open(gm.TINY_EXPECTED) as f:
        return min(t["file_offset"] for t in json.load(f)["tensors"])


class Truncated(gm.ScratchCase):

    def test_cuts(self):
        size = os.path.getsize(gm.TINY)
        header = data_offset()
        self.assertGreater(header, 100000)  # ~176 KB: the vocabulary is in it
        rng = random.Random(5)
        cuts = set(range(64)) | set(range(0, header, 4999)) | {header - 1}
        data = {header, header + 1, size // 2, size - 1}
        while len(data) < 50:
            data.add(rng.randrange(header, size))
        cuts |= data
        self.assertEqual(len(data), 50)

        tmp, mnt = self.tmp, self.mnt
        model = os.path.join(tmp, "model.gguf")
        shutil.copyfile(gm.TINY, model)
        slowest = 0.0
        # one copy, cut shorter and shorter
        for n in sorted(cuts, reverse=True):
            with self.subTest(bytes=n):
                os.truncate(model, n)
                t0 = time.monotonic()
                r = gm.run_ggufs([model, mnt])
                took = time.monotonic() - t0
                slowest = max(slowest, took)
                err = r.stderr.decode(errors="replace")
                self.assertEqual(r.returncode, 1, err)
                self.assertEqual(r.stdout, b"")
                self.assertTrue(err.endswith("\n"), repr(err))
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertTrue(err.startswith("ggufs: %s: " % model), err)
                self.assertLess(took, LIMIT, err)
                self.assertFalse(gm.is_mounted(mnt))
        self.assertEqual(os.listdir(mnt), [])
        print("\n%d cuts, slowest run %.3f s" % (len(cuts), slowest))


if __name__ == "__main__":
    gm.main()
