#!/usr/bin/env python3
"""quants/ of a model holding a NaN, an infinity and a value too large for the scales
of the types it is quantized to (issue 36). llama.cpp's quantizer checks every tensor
it reads and every block it writes (ggml_validate_row_data) and writes no file at all
when one fails: this test first shows that the pinned libllama (ctypes) refuses the
model for each NAME tried. ggufs cannot know that without reading every tensor, so it
lists the NAME with its exact size and gives EIO for the bytes around each block
llama.cpp would refuse (the 128 KiB block of the file that holds it: a quants/ file is
made, cached and failed in those), saying why in the log, and never makes up bytes for
them: read with O_DIRECT in 4 KiB pieces, a piece in such a 128 KiB block fails with
EIO, and every other piece is the bytes of llama.cpp's file of the same model without
the bad values.

Usage: test_quant_nonfinite.py GGUFS_BINARY. Skipped (77) without /dev/fuse or without
the installed node-llama-cpp package (unless GGUFS_REQUIRE_LLAMA is set)."""
import errno
import json
import os
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mount"))
import ggufs_mount as gm  # noqa: E402
import test_quant_plan as qp  # noqa: E402

PIECE = 4096
# the blocks a quants/ file is made in (ggufs(1), QUANTIZATIONS: the cost)
FILE_BLOCK = 128 << 10
# (block values, block bytes) of the types the NAMEs below give these tensors
BLOCKS = {"f32": (1, 4), "f16": (1, 2), "q8_0": (32, 34), "q4_K": (256, 144),
          "q5_K": (256, 176), "q6_K": (256, 210), "q4_0": (32, 18)}
# (tensor, flat element index, value): a NaN in a weight, a value beyond what an fp16
# scale holds after division by the largest quant (and beyond fp16 itself), and an
# infinity in a norm, which every NAME copies as f32 (llama.cpp checks it on reading)
BAD = [("blk.1.ffn_up.weight", 1000, float("nan")),
       ("blk.0.attn_q.weight", 5, 1e9),
       ("output_norm.weight", 3, float("inf"))]
NAMES = ("Q8_0", "Q4_K_M", "F16", "Q4_0")


def tensors_of(path):
    """{name: (type name, absolute offset)} of the GGUF at path, from a mount's
    gguf.json."""
    with gm.Mount(path) as m:
        with open(m.p("gguf.json")) as f:
            doc = json.load(f)
    return {t["name"]: (t["type"], t["offset"]) for t in doc["tensors"]}


class QuantNonfinite(qp.QuantCase):
    PREFIX = "ggufs-quant-nan-"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.clean = os.path.join(cls.dir, "clean.gguf")
        qp.random_llama(cls.clean, seed=21, n_embd=256, n_ff=512, n_layer=2, n_head=4,
                        n_head_kv=4, n_vocab=256, gtype=qp.F32)
        data = bytearray(gm.read_file(cls.clean))
        where = tensors_of(cls.clean)
        for name, k, v in BAD:
            assert where[name][0] == "f32"
            struct.pack_into("<f", data, where[name][1] + 4 * k, v)
        cls.bad = os.path.join(cls.dir, "bad.gguf")
        with open(cls.bad, "wb") as f:
            f.write(data)

    def test_llama_refuses(self):
        """The premise: llama.cpp makes none of these files of the model, each bad value
        alone enough; of the clean model it makes them all."""
        out = os.path.join(self.dir, "out.gguf")
        for name in NAMES:
            self.assertEqual(self.llama.quantize(self.clean, out, qp.FTYPE[name]), 0, name)
            self.assertNotEqual(self.llama.quantize(self.bad, out, qp.FTYPE[name]), 0, name)
        data = gm.read_file(self.clean)
        where = tensors_of(self.clean)
        for tensor, k, v in BAD:
            one = bytearray(data)
            struct.pack_into("<f", one, where[tensor][1] + 4 * k, v)
            with open(out + ".in", "wb") as f:
                f.write(one)
            self.assertNotEqual(self.llama.quantize(out + ".in", out, qp.FTYPE["Q8_0"]), 0,
                                tensor)

    def test_eio_for_the_refused_blocks(self):
        log_dir = tempfile.mkdtemp(prefix="log-", dir=self.dir)
        log = os.path.join(log_dir, "ggufs.log")
        with gm.Mount(self.bad, ["-o", "log=" + log]) as m:
            for name in NAMES:
                with self.subTest(name=name):
                    ref = os.path.join(self.dir, "ref-%s.gguf" % name)
                    self.assertEqual(self.llama.quantize(self.clean, ref, qp.FTYPE[name]), 0)
                    want = gm.read_file(ref)
                    path = m.p("quants", name + ".gguf")
                    self.assertEqual(os.stat(path).st_size, len(want))
                    where = tensors_of(ref)
                    bad = []
                    for tensor, k, _ in BAD:
                        tname, off = where[tensor]
                        be, bb = BLOCKS[tname]
                        start = off + k // be * bb
                        bad.append((start, start + bb))
                    failed = 0
                    for off in range(0, len(want), PIECE):
                        end = min(off + PIECE, len(want))
                        lo = off // FILE_BLOCK * FILE_BLOCK
                        touches = any(s < lo + FILE_BLOCK and lo < e for s, e in bad)
                        try:
                            got = gm.pread_direct(path, end - off, off)
                        except OSError as e:
                            self.assertEqual(e.errno, errno.EIO)
                            self.assertTrue(touches, "EIO at %d, no bad block there" % off)
                            failed += 1
                            continue
                        self.assertFalse(touches, "bytes at %d, a refused block" % off)
                        self.assertEqual(got, want[off:end], off)
                    self.assertGreaterEqual(failed, len(BAD))
        with open(log) as f:
            text = f.read()
        for tensor, _, _ in BAD:
            self.assertIn("tensor '%s' as " % tensor, text)
        self.assertIn("which llama.cpp's quantizer refuses", text)

    def test_listing_reads_nothing(self):
        """The NAMEs are listed with their sizes all the same: whether a model holds a
        bad value is known only by reading it."""
        with gm.Mount(self.bad) as m, gm.Mount(self.clean) as c:
            self.assertEqual(sorted(os.listdir(m.p("quants"))), sorted(os.listdir(c.p("quants"))))
            with open(m.p("quants", "quants.tsv")) as a, open(c.p("quants", "quants.tsv")) as b:
                self.assertEqual(a.read(), b.read())


if __name__ == "__main__":
    qp.mount_test_main()
