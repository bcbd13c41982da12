#!/usr/bin/env python3
"""model.gguf with -o edits=FILE while an older reader keeps it mapped (issue 24 item 2):
a process that mapped model.gguf before the edits (a running llama-server) keeps
dropping and faulting its pages, so the kernel keeps refilling them through its old
open file; meanwhile 100 edits each move the data section (the header grows and shrinks
by more than the alignment), and after each edit's close two new readers read
model.gguf whole. Every new reader must get exactly the new state (its sha256 and size
equal to the same GGUF written by hand), and the old reader its own state only, on
every pass: each state has a page cache of its own."""
import hashlib
import os
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import ggufs_mount as gm

GGML_F32 = 0
PAGES = 1024            # a 4 MiB data section, every 4 KiB page a different pattern
ROUNDS = 100
TIME_LIMIT = 240.0      # seconds for all rounds: a failure, never a hang

# The old reader: maps model.gguf, then until told to stop (stdin closed) drops the
# pages it holds (fadvise) and faults every one in again, comparing the whole mapping
# with its state's sha256. Prints passes and mismatches.
OLD_READER = r"""
import hashlib, mmap, os, select, sys
want = sys.argv[2]
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
print("mapped", flush=True)
passes = bad = 0
while not select.select([sys.stdin], [], [], 0)[0] and passes < 100000:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    if hashlib.sha256(m).hexdigest() != want:
        bad += 1
    passes += 1
print(passes, bad, flush=True)
"""


def model_bytes(name):
    """The test model with general.name = name, as a GGUF file's bytes."""
    data = b"".join(struct.pack("<I", p) * 1024 for p in range(PAGES))
    with tempfile.NamedTemporaryFile() as f:
        gm.write_gguf(f.name, [("general.architecture", "llama"), ("general.name", name)],
                      [("pages", [len(data) // 4], GGML_F32, data)])
        return gm.read_file(f.name)


def sha_of(path):
    """sha256 and size of what a new open of path reads."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest(), size


class EditsPages(unittest.TestCase):
    def test_old_mapping_new_readers(self):
        tmp = tempfile.mkdtemp(prefix="ggufs-edits-pages-")
        model, fix = os.path.join(tmp, "m.gguf"), os.path.join(tmp, "fix.json")
        names = ["v0", "short", "long-" + "x" * 200]
        want = {}
        for n in names:
            b = model_bytes(n)
            want[n] = (hashlib.sha256(b).hexdigest(), len(b))
        with open(model, "wb") as f:
            f.write(model_bytes("v0"))
        try:
            with gm.Mount(model, ["-o", "edits=" + fix]) as m:
                mf = m.p("model.gguf")
                self.assertEqual(sha_of(mf), want["v0"])
                old = subprocess.Popen([sys.executable, "-c", OLD_READER, mf, want["v0"][0]],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                try:
                    self.assertEqual(old.stdout.readline(), b"mapped\n")
                    wrong = []
                    start = time.monotonic()
                    for r in range(ROUNDS):
                        self.assertLess(time.monotonic() - start, TIME_LIMIT, "round %d" % r)
                        name = names[1 + r % 2]
                        with open(m.p("metadata", "general.name"), "w") as f:
                            f.write(name + "\n")
                        for reader in range(2):
                            got = sha_of(mf)
                            if got != want[name]:
                                wrong.append((r, reader, got[1], want[name][1]))
                finally:
                    old.stdin.close()
                    out = old.stdout.read().split()
                    old.wait(timeout=60)
                    old.stdout.close()
                self.assertEqual(old.returncode, 0)
                self.assertEqual(wrong, [], "new readers that got other bytes (round, "
                                 "reader, size got, size wanted)")
                passes, bad = int(out[0]), int(out[1])
                self.assertGreater(passes, 0)
                self.assertEqual(bad, 0, "old reader passes that saw another state")
                self.assertEqual(m.stderr(), "")
        finally:
            for f in os.listdir(tmp):
                os.unlink(os.path.join(tmp, f))
            os.rmdir(tmp)


if __name__ == "__main__":
    gm.main()
