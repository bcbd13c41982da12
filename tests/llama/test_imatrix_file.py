#!/usr/bin/env python3
"""ggufs reads an importance matrix as llama-quantize does (issue 46): for real matrices
that llama-imatrix writes of the test model (GGUF and the legacy .dat) and for crafted
files on every edge of both formats, the weights ggufs makes (lib/1-format/imatrix_file.h,
through tests/imatrix_dump.c) equal, bit for bit, those llama-quantize's own load_imatrix
makes (tests/llama/imatrix_ref.cpp compiled with the pinned source's quantize.cpp), with
the same chunk count and dataset; a file llama-quantize refuses or crashes on, ggufs
refuses. Each case also names what llama-quantize does with it, and that is checked
too, so the cases keep testing what they say.

    python3 tests/llama/test_imatrix_file.py BUILD/tests/imatrix_dump CACHE_DIR

Skipped (77) without the package or g++, unless GGUFS_REQUIRE_LLAMA is set: there it
fails."""
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llama_tools  # noqa: E402

DATA = os.environ.get("GGUFS_TEST_DATA", os.path.join(HERE, "..", "data"))
MODEL = os.path.join(DATA, "tinyllama-q4km.gguf")
DUMP = None
TOOLS = None

U32, F32, STRING, ARRAY, U64 = 4, 6, 8, 9, 10
T_F32, T_F16 = 0, 1


def gstr(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b


def kv_bytes(key, vtype, value):
    out = gstr(key) + struct.pack("<I", vtype)
    if vtype == U32:
        return out + struct.pack("<I", value)
    if vtype == U64:
        return out + struct.pack("<Q", value)
    if vtype == STRING:
        return out + gstr(value)
    elem, items = value
    out += struct.pack("<IQ", elem, len(items))
    for it in items:
        out += gstr(it) if elem == STRING else struct.pack("<I", it)
    return out


def gguf(kvs, tensors):
    """A GGUF v3 image: kvs [(key, type, value)] (an array: (elem type, items)); tensors
    [(name, dims, ggml type, data bytes)], aligned to 32."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    out += b"".join(kv_bytes(*kv) for kv in kvs)
    off, offsets = 0, []
    for t in tensors:
        offsets.append(off)
        off += len(t[3]) + (-len(t[3]) % 32)
    for (name, dims, gtype, _), o in zip(tensors, offsets):
        out += gstr(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", gtype, o)
    out += b"\0" * (-len(out) % 32)
    for t in tensors:
        out += t[3] + b"\0" * (-len(t[3]) % 32)
    return out


def f32s(values):
    return struct.pack("<%df" % len(values), *values)


def meta(chunks=5, size=512, datasets=("calib.txt",)):
    return [("general.type", STRING, "imatrix"),
            ("imatrix.datasets", ARRAY, (STRING, list(datasets))),
            ("imatrix.chunk_count", U32, chunks), ("imatrix.chunk_size", U32, size)]


def pair(name, sums, counts, ne0=None):
    ne0 = ne0 or len(sums)
    dims = [ne0, len(sums) // ne0] if len(sums) % ne0 == 0 else [len(sums)]
    return [(name + ".in_sum2", dims, T_F32, f32s(sums)),
            (name + ".counts", [len(counts)], T_F32, f32s(counts))]


def values(n, seed):
    """n positive sums over several decades, as real matrices hold."""
    x, out = seed, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out.append((x / (1 << 31) + 0.01) * 10.0 ** ((x >> 7) % 9 - 3))
    return out


def legacy(entries, tail=b""):
    """A .dat image: entries [(name bytes, ncall, sums)], then tail as it is."""
    out = struct.pack("<i", len(entries))
    for name, ncall, sums in entries:
        name = name.encode() if isinstance(name, str) else name
        out += struct.pack("<i", len(name)) + name + struct.pack("<ii", ncall, len(sums))
        out += f32s(sums)
    return out + tail


EXPERT_COUNTS = [0.0, 0.4, 0.5, 2.5, -3.0, math.nan, 1e30, math.inf, 7.0]

# name: (image, what llama-quantize does: "ok", "refuses" or "crashes")
CASES = {
    "gguf-basic": (gguf(meta(), pair("blk.0.attn_q.weight", values(64, 1), [3.0])
                        + pair("output.weight", values(32, 2), [10.0])), "ok"),
    "gguf-expert-counts": (gguf(meta(), pair("blk.0.ffn_up_exps.weight", values(36, 3),
                                             EXPERT_COUNTS, ne0=4)), "ok"),
    "gguf-values-past-experts": (gguf(meta(), [
        ("w.in_sum2", [35], T_F32, f32s(values(35, 4))),
        ("w.counts", [8], T_F32, f32s([2.0] * 8))]), "ok"),
    "gguf-more-counts-than-sums": (gguf(meta(), [
        ("w.in_sum2", [3], T_F32, f32s(values(3, 5))),
        ("w.counts", [8], T_F32, f32s([2.0] * 8))]), "ok"),
    "gguf-dataset-nul": (gguf(meta(datasets=(b"ab\0cd", "x")),
                              pair("w", values(8, 6), [1.0])), "ok"),
    "gguf-no-dataset": (gguf(meta(datasets=()), pair("w", values(8, 7), [1.0])), "ok"),
    "gguf-datasets-not-strings": (gguf(
        meta()[:1] + [("imatrix.datasets", ARRAY, (U32, [1, 2]))] + meta()[2:],
        pair("w", values(8, 8), [1.0])), "ok"),
    "gguf-datasets-a-string": (gguf(
        meta()[:1] + [("imatrix.datasets", STRING, "calib")] + meta()[2:],
        pair("w", values(8, 8), [1.0])), "ok"),
    "gguf-chunks-past-int32": (gguf(meta(chunks=0xFFFFFFFF), pair("w", values(8, 9), [1.0])),
                               "ok"),
    "gguf-other-tensors": (gguf(meta(), [("token_embd.weight", [4], T_F32, f32s([1, 2, 3, 4]))]
                                + pair("w", values(8, 10), [4.0])), "ok"),
    "gguf-no-pairs": (gguf(meta(), [("token_embd.weight", [4], T_F32, f32s([1, 2, 3, 4]))]),
                      "ok"),
    "gguf-empty-base-name": (gguf(meta(), pair("", values(8, 11), [2.0])), "ok"),
    "gguf-non-finite-sums": (gguf(meta(), pair("w", [1.0, math.inf, math.nan, 2.0], [1.0])),
                             "ok"),
    "gguf-no-chunk-size": (gguf(meta()[:3], pair("w", values(8, 12), [1.0])), "refuses"),
    "gguf-no-datasets": (gguf([meta()[0]] + meta()[2:], pair("w", values(8, 12), [1.0])),
                         "refuses"),
    "gguf-sums-without-counts": (gguf(meta(), pair("w", values(8, 13), [1.0])[:1]
                                      + pair("v", values(8, 13), [1.0])), "refuses"),
    "gguf-counts-without-sums": (gguf(meta(), pair("w", values(8, 13), [1.0])[1:]), "refuses"),
    "gguf-f16-counts": (gguf(meta(), [("w.in_sum2", [4], T_F32, f32s(values(4, 14))),
                                      ("w.counts", [4], T_F16, b"\0\x3c" * 4)]), "refuses"),
    "gguf-no-tensors": (gguf(meta(), []), "refuses"),
    "gguf-chunk-count-u64": (gguf(meta()[:2] + [("imatrix.chunk_count", U64, 5)]
                                  + meta()[3:], pair("w", values(8, 15), [1.0])), "crashes"),
    "legacy-basic": (legacy([("blk.0.attn_q.weight", 4, values(64, 20)),
                             ("output.weight", 0, values(16, 21))]), "ok"),
    "legacy-negative-ncall": (legacy([("w", -2, values(8, 22))]), "ok"),
    "legacy-name-twice": (legacy([("w", 3, values(8, 23)), ("v", 1, [1.0]),
                                  ("w", 5, values(4, 24))]), "ok"),
    "legacy-name-nul": (legacy([(b"ab\0c", 2, values(8, 25))]), "ok"),
    "legacy-empty-name": (legacy([("", 2, values(8, 25))]), "ok"),
    "legacy-tail-1": (legacy([("w", 2, values(8, 26))], b"\x07"), "ok"),
    "legacy-tail-3": (legacy([("w", 2, values(8, 26))], b"\x07\x01\x02"), "ok"),
    "legacy-tail-chunks": (legacy([("w", 2, values(8, 26))], struct.pack("<i", 9)), "ok"),
    "legacy-tail-chunks-len-cut": (legacy([("w", 2, values(8, 26))],
                                          struct.pack("<i", 9) + b"\x05\x00"), "ok"),
    "legacy-tail-dataset": (legacy([("w", 2, values(8, 26))],
                                   struct.pack("<ii", 9, 5) + b"xy\0z!"), "ok"),
    "legacy-tail-dataset-cut": (legacy([("w", 2, values(8, 26))],
                                       struct.pack("<ii", 9, 50) + b"short"), "ok"),
    "legacy-tail-dataset-negative": (legacy([("w", 2, values(8, 26))],
                                            struct.pack("<ii", 9, -4) + b"abcd"), "ok"),
    "legacy-tail-more": (legacy([("w", 2, values(8, 26))],
                                struct.pack("<ii", 9, 2) + b"ab" + b"junk after"), "ok"),
    "legacy-no-entries": (struct.pack("<i", 0), "refuses"),
    "legacy-negative-entries": (struct.pack("<i", -5) + b"\0" * 32, "refuses"),
    "legacy-entries-past-end": (legacy([("w", 2, values(8, 27))])[:-4], "refuses"),
    "legacy-too-many-entries": (struct.pack("<i", 1000) + legacy([("w", 2, values(8, 27))])[4:],
                                "refuses"),
    "legacy-no-values": (struct.pack("<ii", 1, 1) + b"w" + struct.pack("<ii", 1, 0), "refuses"),
    "legacy-name-cut": (struct.pack("<ii", 1, 100) + b"w", "refuses"),
    "empty-file": (b"", "refuses"),
    "gguf-magic-garbage": (b"GGUF" + b"\xff" * 60, "refuses"),
}


def run(cmd, path, out):
    """0 (read), 1 (refused) or "crash" (a signal, or another exit) of cmd on path."""
    p = subprocess.run([cmd, path, out], env=TOOLS.env(), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=120)
    if p.returncode in (0, 1):
        return p.returncode, p.stderr
    return "crash", p.stderr


class ImatrixFile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ggufs-imatrix-")
        cls.ref = TOOLS.build("imatrix_ref", extra=os.path.join(HERE, "imatrix_ref.cpp"),
                              with_dir="tools/quantize")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def compare(self, path, expect):
        ref_out, our_out = path + ".ref", path + ".ours"
        ref, ref_err = run(self.ref, path, ref_out)
        ours, our_err = run(DUMP, path, our_out)
        self.assertEqual(ref, {"ok": 0, "refuses": 1, "crashes": "crash"}[expect],
                         "llama-quantize: %s" % ref_err.decode(errors="replace")[-400:])
        if ref == 0:
            self.assertEqual(ours, 0, our_err.decode(errors="replace"))
            with open(ref_out) as a, open(our_out) as b:
                ref_lines, our_lines = a.read().splitlines(), b.read().splitlines()
            self.assertEqual(len(ref_lines), len(our_lines))
            for r, o in zip(ref_lines, our_lines):
                self.assertEqual(r, o)
        else:
            self.assertEqual(ours, 1, "ggufs read a file llama-quantize %s" % (
                "refuses" if ref == 1 else "crashes on"))
            self.assertEqual(len(our_err.strip().splitlines()), 1, our_err)

    def test_crafted(self):
        for name, (image, expect) in CASES.items():
            with self.subTest(case=name):
                path = os.path.join(self.tmp.name, name)
                with open(path, "wb") as f:
                    f.write(image)
                self.compare(path, expect)

    def test_llama_imatrix(self):
        """Matrices llama-imatrix itself writes of the test model, in both formats."""
        tool = TOOLS.build("imatrix")
        text = os.path.join(self.tmp.name, "calib.txt")
        words = ("the quick brown fox jumps over a lazy dog while models of language "
                 "learn to predict words and numbers one two three").split()
        with open(text, "w") as f:
            f.write(" ".join(words[(i * 7 + i // 3) % len(words)] for i in range(3000)))
        for fmt in ("gguf", "dat"):
            with self.subTest(format=fmt):
                out = os.path.join(self.tmp.name, "model-imatrix." + fmt)
                subprocess.run([tool, "-m", MODEL, "-f", text, "-c", "128", "--chunks", "3",
                                "-t", "2", "-o", out, "--output-format", fmt],
                               env=TOOLS.env(), check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=300)
                self.compare(out, "ok")
                with open(out + ".ours") as f:
                    lines = f.read().splitlines()
                self.assertEqual(lines[0], "chunks 3")
                self.assertGreater(len(lines), 10)   # an entry per weight the model ran


def main():
    global DUMP, TOOLS
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    DUMP, cache = sys.argv.pop(1), sys.argv.pop(1)
    TOOLS = llama_tools.LlamaTools(cache)
    if not TOOLS.available():
        if os.environ.get("GGUFS_REQUIRE_LLAMA"):
            print("the pinned node-llama-cpp package or g++ is missing", file=sys.stderr)
            return 1
        print("skipped: no node-llama-cpp package or g++")
        return 77
    prog = unittest.main(exit=False)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
