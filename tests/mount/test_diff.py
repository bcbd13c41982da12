#!/usr/bin/env python3
"""ggufs --diff A B against numpy: every figure of every tensor line and of the model's
line is computed again in float64 over the .f32 files of real mounts of A and B, and
must agree within 1e-9 relative (max_abs_err exactly; identical tensors exactly 0 and
1; empty where a figure is undefined). On the bundled model with itself, on the
all-types vectors (NaN and infinite scales), and on real pairs that diff_pair writes:
the bundled model's dequantized values stored as f32 and as f16 (with tensors and keys
that do not pair). Also: --json says the same, names and values stay in their TSV
fields, usage errors exit 2, a bad or shrinking model exits 3 with one line.

Run as `python3 test_diff.py GGUFS DIFF_PAIR`."""
import json
import math
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import unittest

import numpy as np

import ggufs_mount as gm

COLUMNS = ["name", "type_a", "type_b", "elements", "rmse", "rel_rmse", "max_abs_err",
           "cosine", "nonfinite"]
FIGURES = ["rmse", "rel_rmse", "max_abs_err", "cosine"]
ALLTYPES = os.path.join(gm.VECTORS, "alltypes.gguf")


def unescape(s):
    """A field as render_escaped wrote it, back to bytes."""
    out, i = bytearray(), 0
    b = s.encode("latin-1") if isinstance(s, str) else s
    while i < len(b):
        c = b[i]
        if c == 0x5c and i + 1 < len(b):
            n = b[i + 1]
            if n in b"\\nrt":
                out.append({0x5c: 0x5c, 0x6e: 0x0a, 0x72: 0x0d, 0x74: 0x09}[n])
                i += 2
                continue
            if n == 0x78:
                out.append(int(b[i + 2:i + 4], 16))
                i += 4
                continue
        out.append(c)
        i += 1
    return bytes(out)


def parse_tsv(out):
    """(tensor rows as dicts, the other lines as lists of fields by kind, the model
    line as a dict) of a --diff report."""
    lines = out.split(b"\n")
    assert lines[-1] == b"", "the report ends with a newline"
    lines = lines[:-1]
    assert lines[0].decode() == "\t".join(COLUMNS), lines[0]
    rows, other, model = [], {}, None
    for line in lines[1:]:
        f = line.split(b"\t")
        assert model is None, "the model's line is the last"
        if len(f) == len(COLUMNS):
            assert not other, "tensor lines come first"
            rows.append(dict(zip(COLUMNS, f)))
        elif f[0] == b"model":
            model = dict(x.decode().split("=", 1) for x in f[1:])
        else:
            other.setdefault(f[0].decode(), []).append(f[1:])
    assert model is not None
    return rows, other, model


def reference(a, b):
    """The figures and sums of b against a in float64, as the man page defines them."""
    with np.errstate(invalid="ignore"):
        a = a.astype(np.float64)
        b = b.astype(np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    nonfinite = int((~ok).sum())
    a, b = a[ok], b[ok]
    n = len(a)
    d = b - a
    s = {"d2": float(np.sum(d * d)), "a2": float(np.sum(a * a)), "b2": float(np.sum(b * b)),
         "ab": float(np.sum(a * b)), "n": n, "nonfinite": nonfinite}
    fig = {"rmse": None, "rel_rmse": None, "max_abs_err": None, "cosine": None}
    if n:
        fig["rmse"] = math.sqrt(s["d2"] / n)
        fig["max_abs_err"] = float(np.max(np.abs(d)))
        if s["a2"] > 0:
            fig["rel_rmse"] = math.sqrt(s["d2"] / s["a2"])
            if s["b2"] > 0:
                fig["cosine"] = s["ab"] / math.sqrt(s["a2"] * s["b2"])
    return fig, s


def close(tc, got, want, what):
    """got (text or JSON number) agrees with want within 1e-9 relative."""
    if want is None:
        tc.assertIn(got, (b"", None), what)
        return
    g = float(got)
    tc.assertTrue(abs(g - want) <= 1e-9 * abs(want) or g == want, "%s: %r vs %r" % (what, got, want))


def f32_files(mount):
    """{name: (gguf.json's tensor, its .f32 values)} of a mounted model."""
    doc = json.loads(gm.read_file(mount.p("gguf.json")))
    out = {}
    for t in doc["tensors"]:
        if "f32" in t:
            out[t["name"]] = (t, np.fromfile(mount.p(t["f32"]), dtype="<f4"))
    return doc, out


def diff(*args):
    r = gm.run_ggufs(["--diff"] + list(args), timeout=120)
    return r


class Numpy(gm.PairsCase):
    PAIRS = {"b32": ("b32.gguf", ["f32"]), "b16": ("b16.gguf", ["f16"]),
             "b16v": ("b16v.gguf", ["f16", "--vary"])}

    def check_against_numpy(self, a_path, b_path, identical=False):
        """Every line of --diff A B against numpy over both mounts' .f32 files; returns
        (rows, other, model) for further checks."""
        r = diff(a_path, b_path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"")
        rows, other, model = parse_tsv(r.stdout)
        with gm.Mount(a_path) as ma, gm.Mount(b_path) as mb:
            doc_a, fa = f32_files(ma)
            doc_b, fb = f32_files(mb)
            dims_b = {t["name"]: t for t in doc_b["tensors"]}
            # the pairs, in A's order: every tensor of A that B has with the same dims
            want = [t for t in doc_a["tensors"]
                    if t["name"] in dims_b and dims_b[t["name"]]["dims"] == t["dims"]]
            self.assertEqual([unescape(x["name"]).decode() for x in rows],
                             [t["name"] for t in want])
            total = {"d2": 0.0, "a2": 0.0, "n": 0, "nonfinite": 0}
            lowest, undefined = None, []
            for row, t in zip(rows, want):
                name = t["name"]
                self.assertEqual(row["type_a"].decode(), t["type"])
                self.assertEqual(row["type_b"].decode(), dims_b[name]["type"])
                self.assertEqual(int(row["elements"]), int(np.prod(t["dims"])))
                if name not in fa or name not in fb:   # no dequantizer: no figures
                    self.assertEqual([row[k] for k in FIGURES + ["nonfinite"]], [b""] * 5)
                    continue
                fig, s = reference(fa[name][1], fb[name][1])
                self.assertEqual(int(row["nonfinite"]), s["nonfinite"], name)
                for k in FIGURES:
                    close(self, row[k], fig[k], "%s %s" % (name, k))
                if fig["max_abs_err"] is not None:   # exactly: a maximum of exact values
                    self.assertEqual(float(row["max_abs_err"]), fig["max_abs_err"], name)
                if identical and s["n"]:
                    self.assertEqual((row["rmse"], row["max_abs_err"]), (b"0", b"0"), name)
                    if fig["cosine"] is not None:
                        self.assertEqual((row["rel_rmse"], row["cosine"]), (b"0", b"1"), name)
                for k in ("d2", "a2", "n", "nonfinite"):
                    total[k] += s[k]
                if fig["cosine"] is None or fig["rel_rmse"] is None:
                    undefined.append(name)
                if fig["cosine"] is not None and (lowest is None or fig["cosine"] < lowest[0]):
                    lowest = (fig["cosine"], name)
            self.assertEqual(int(model["tensors"]), len([t for t in want if t["name"] in fa]))
            self.assertEqual(int(model["elements"]), total["n"] + total["nonfinite"])
            self.assertEqual(int(model["nonfinite"]), total["nonfinite"])
            close(self, model["rel_rmse"].encode(),
                  math.sqrt(total["d2"] / total["a2"]) if total["a2"] > 0 else None, "model")
            if lowest is None:
                self.assertEqual(model["lowest_cosine"], "")
            else:
                close(self, model["lowest_cosine"].encode(), lowest[0], "lowest cosine")
                self.assertEqual(unescape(model["lowest_cosine_tensor"]).decode(), lowest[1])
            self.assertEqual(int(model["undefined"]), len(undefined))
            self.assertEqual(unescape(model["undefined_tensor"]).decode(),
                             undefined[0] if undefined else "")
            for side, doc in (("a", doc_a), ("b", doc_b)):
                size = sum(t["size"] for t in doc["tensors"])
                elements = sum(int(np.prod(t["dims"])) for t in doc["tensors"])
                self.assertEqual(int(model["bytes_" + side]), size)
                close(self, model["bpw_" + side].encode(), 8.0 * size / elements, "bpw")
        return rows, other, model

    def test_tiny_with_itself(self):
        rows, other, model = self.check_against_numpy(gm.TINY, gm.TINY, identical=True)
        self.assertEqual(other, {})
        self.assertEqual(len(rows), 21)
        self.assertEqual((model["rel_rmse"], model["lowest_cosine"]), ("0", "1"))

    def test_alltypes_with_itself(self):
        """NaN and infinite scales: counted, never in a sum (so still exactly 0 and 1)."""
        rows, other, model = self.check_against_numpy(ALLTYPES, ALLTYPES, identical=True)
        self.assertEqual(other, {})
        self.assertGreater(sum(int(r["nonfinite"] or 0) for r in rows), 1000)
        self.assertGreater(int(model["nonfinite"]), 1000)

    def test_f32_copy_is_exact(self):
        """The dequantized values stored as f32 are the .f32 files: no error at all,
        and the keys that differ are said."""
        rows, other, model = self.check_against_numpy(gm.TINY, self.b32, identical=True)
        self.assertTrue(all(r["type_b"] == b"f32" for r in rows))
        self.assertEqual(sorted(other), ["key_added", "key_changed", "key_removed"])
        self.assertEqual(other["key_added"], [[b"test.precision", b"string", b"f32"]])
        self.assertEqual(other["key_removed"], [[b"general.quantization_version", b"uint32", b"2"]])
        self.assertEqual(other["key_changed"], [[b"general.file_type", b"uint32", b"15",
                                                 b"uint32", b"0"]])

    def test_f16_of_the_quant(self):
        """A real quantization: the f16 rounding of every value, figures against numpy."""
        rows, _, model = self.check_against_numpy(gm.TINY, self.b16)
        self.assertGreater(float(model["rel_rmse"]), 1e-6)
        self.assertLess(float(model["rel_rmse"]), 1e-3)
        self.assertTrue(all(r["cosine"] != b"1" or r["rmse"] == b"0" for r in rows))

    def test_f32_against_f16_with_unpaired(self):
        """B from A's values at half precision, less a tensor, one reshaped, one added."""
        rows, other, _ = self.check_against_numpy(self.b32, self.b16v)
        with gm.Mount(self.b32) as m:
            doc = json.loads(gm.read_file(m.p("gguf.json")))
        last = max(doc["tensors"], key=lambda t: t["size"])   # the first of the largest
        self.assertEqual(other["only_a"], [[last["name"].encode(), b"f32",
                                            ",".join(map(str, last["dims"])).encode()]])
        self.assertEqual(other["only_b"], [[b"extra.weight", b"f16", b"64"]])
        (dims,) = other["dims"]
        t = next(t for t in doc["tensors"] if t["name"] == dims[0].decode())
        self.assertEqual(dims[1:], [b"f32", str(t["dims"][0]).encode(), b"f16",
                                    ("%d,2" % (t["dims"][0] // 2)).encode()])
        self.assertEqual(len(rows), len(doc["tensors"]) - 2)

    def test_json_says_the_same(self):
        tsv = diff(self.b32, self.b16v)
        js = diff("--json", self.b32, self.b16v)
        self.assertEqual(js.returncode, 0, js.stderr)
        doc = json.loads(js.stdout)
        rows, other, model = parse_tsv(tsv.stdout)
        self.assertEqual((doc["a"], doc["b"]), (self.b32, self.b16v))
        self.assertEqual(len(doc["tensors"]), len(rows))
        for t, row in zip(doc["tensors"], rows):
            self.assertEqual(t["name"].encode(), row["name"])
            for k in FIGURES:
                if row[k] == b"":
                    self.assertIsNone(t[k])
                else:
                    self.assertEqual(t[k], float(row[k]), k)   # the same shortest text
            self.assertEqual(t["nonfinite"], int(row["nonfinite"]))
        self.assertEqual([x["name"].encode() for x in doc["only_a"]], [x[0] for x in other["only_a"]])
        self.assertEqual([x["name"] for x in doc["only_b"]], ["extra.weight"])
        self.assertEqual(doc["dims"][0]["dims_b"][1], 2)
        self.assertEqual([x["key"] for x in doc["keys_changed"]],
                         ["general.file_type", "test.precision"])
        self.assertEqual(doc["keys_changed"][0]["value_a"], "0")
        self.assertEqual(doc["keys_changed"][0]["value_b"], "1")
        self.assertEqual(doc["model"]["tensors"], int(model["tensors"]))
        self.assertEqual(doc["model"]["rel_rmse"], float(model["rel_rmse"]))
        self.assertEqual(doc["model"]["lowest_cosine_tensor"],
                         unescape(model["lowest_cosine_tensor"]).decode())

    def test_alltypes_json_nulls(self):
        """Undefined figures are JSON null, never NaN (which JSON has not)."""
        js = diff("--json", ALLTYPES, ALLTYPES)
        self.assertEqual(js.returncode, 0, js.stderr)
        def refuse(c):
            raise ValueError("not JSON: " + c)
        doc = json.loads(js.stdout, parse_constant=refuse)
        self.assertGreater(sum(t["nonfinite"] for t in doc["tensors"]), 1000)


# ---- a small GGUF writer for names and values that must stay in their fields ----

def gguf_str(s):
    return struct.pack("<Q", len(s)) + s


def write_gguf(path, kvs, tensors):
    """kvs: [(key bytes, value bytes)] as strings; tensors: [(name bytes, [f32 values])]."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, v in kvs:
        out += gguf_str(k) + struct.pack("<I", 8) + gguf_str(v)
    off = 0
    for name, values in tensors:
        out += gguf_str(name) + struct.pack("<IQIQ", 1, len(values), 0, off)
        off += (4 * len(values) + 31) // 32 * 32
    out += b"\0" * ((32 - len(out) % 32) % 32)
    for _, values in tensors:
        data = struct.pack("<%df" % len(values), *values)
        out += data + b"\0" * ((32 - len(data) % 32) % 32)
    with open(path, "wb") as f:
        f.write(out)


class Fields(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ggufs-diff-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_escapes_and_cut(self):
        """Names and values with tabs, newlines, backslashes and control bytes stay in
        one field each, escaped as metadata/ escapes them; a long value is cut at 200
        bytes with its full length said; an all-zero A or B leaves figures empty."""
        odd = b"t\tn\nr\rb\\x\x01\x7f.weight"
        a, b = os.path.join(self.tmp, "a.gguf"), os.path.join(self.tmp, "b.gguf")
        long_a, long_b = b"\xc3\xa9" * 300, b"y" * 300
        write_gguf(a, [(b"general.architecture", b"x"), (b"k\tey", b"v\n1"), (b"long", long_a)],
                   [(odd, [1.0, 2.0, 3.0, 4.0]), (b"zero_a", [0.0] * 8), (b"zero_b", [1.0] * 8)])
        write_gguf(b, [(b"general.architecture", b"x"), (b"k\tey", b"v\n2"), (b"long", long_b)],
                   [(odd, [1.0, 2.0, 3.0, 5.0]), (b"zero_a", [1.0] * 8), (b"zero_b", [0.0] * 8)])
        r = diff(a, b)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows, other, model = parse_tsv(r.stdout)
        self.assertEqual(rows[0]["name"], b"t\\tn\\nr\\rb\\\\x\\x01\\x7f.weight")
        self.assertEqual(unescape(rows[0]["name"]), odd)
        self.assertEqual(rows[0]["rmse"], b"0.5")            # sqrt(1/4)
        self.assertEqual(rows[0]["max_abs_err"], b"1")
        self.assertEqual([rows[1][k] for k in FIGURES], [b"1", b"", b"1", b""])
        self.assertEqual([rows[2][k] for k in FIGURES], [b"1", b"1", b"1", b""])
        changed = {unescape(x[0]): x for x in other["key_changed"]}
        self.assertEqual(changed[b"k\tey"], [b"k\\tey", b"string", b"v\\n1", b"string", b"v\\n2"])
        # 200 bytes of 2-byte characters: 100 of them, then the length of metadata/long
        # the value's own length: 600 and 300 bytes (metadata/long adds a newline)
        self.assertEqual(changed[b"long"][2], b"\xc3\xa9" * 100 + b"... (600 bytes)")
        self.assertEqual(changed[b"long"][4], b"y" * 200 + b"... (300 bytes)")
        self.assertEqual(unescape(model["lowest_cosine_tensor"]), odd)
        # the all-zero tensors are not hidden behind the lowest cosine
        self.assertEqual((model["undefined"], model["undefined_tensor"]), ("2", "zero_a"))
        js = json.loads(diff("--json", a, b).stdout)
        self.assertEqual([js["tensors"][1][k] for k in FIGURES], [1, None, 1, None])
        self.assertEqual(js["tensors"][0]["name"].encode("utf-8", "surrogateescape"), odd)
        self.assertEqual(js["keys_changed"][1]["value_a"], "\u00e9" * 100)
        self.assertEqual(js["keys_changed"][1]["bytes_a"], 600)
        self.assertEqual((js["model"]["undefined"], js["model"]["undefined_tensor"]),
                         (2, "zero_a"))

    def test_nothing_in_common(self):
        a, b = os.path.join(self.tmp, "a.gguf"), os.path.join(self.tmp, "b.gguf")
        write_gguf(a, [(b"general.architecture", b"x")], [(b"p", [1.0])])
        write_gguf(b, [(b"general.architecture", b"x")], [(b"q", [1.0])])
        r = diff("--json", a, b)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["tensors"], [])
        self.assertEqual(doc["model"]["tensors"], 0)
        self.assertIsNone(doc["model"]["rel_rmse"])
        self.assertIsNone(doc["model"]["lowest_cosine"])
        self.assertEqual((doc["model"]["undefined"], doc["model"]["undefined_tensor"]), (0, None))
        rows, other, model = parse_tsv(diff(a, b).stdout)
        self.assertEqual((rows, other["only_a"], other["only_b"]), ([], [[b"p", b"f32", b"1"]],
                                                                   [[b"q", b"f32", b"1"]]))
        self.assertEqual((model["rel_rmse"], model["lowest_cosine_tensor"]), ("", ""))


class BadInput(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ggufs-diff-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def one_line(self, r, code):
        self.assertEqual(r.returncode, code, r.stderr)
        self.assertEqual(r.stdout, b"")
        lines = r.stderr.decode().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("ggufs: "), lines[0])
        return lines[0]

    def test_usage(self):
        for args in (["--diff"], ["--diff", gm.TINY], ["--diff", gm.TINY, gm.TINY, gm.TINY],
                     ["--diff", "--check", gm.TINY, gm.TINY], ["--diff", "-f", gm.TINY, gm.TINY],
                     ["--diff", "-o", "nonempty", gm.TINY, gm.TINY], ["--diff", "", gm.TINY]):
            self.one_line(gm.run_ggufs(args), 2)

    def test_bad_models(self):
        """A missing or hostile A or B: exit 3, the line --check says of it."""
        cut = os.path.join(self.tmp, "cut.gguf")
        with open(gm.TINY, "rb") as f:
            data = f.read()
        with open(cut, "wb") as f:
            f.write(data[:len(data) // 2])
        lies = os.path.join(self.tmp, "lies.gguf")
        with open(lies, "wb") as f:
            f.write(data[:8] + struct.pack("<Q", 1 << 40) + data[16:])
        for bad in (cut, lies, os.path.join(self.tmp, "missing.gguf")):
            want = gm.run_ggufs(["--check", bad]).stderr
            for args in ((gm.TINY, bad), (bad, gm.TINY)):
                r = diff(*args)
                self.assertEqual(self.one_line(r, 3).encode() + b"\n", want)

    def test_shrinking(self):
        """B shrinks while it is compared: exit 3, one line naming a tensor of B that
        could not be read, and no report (no figure from bytes that are gone)."""
        a, b = os.path.join(self.tmp, "a.gguf"), os.path.join(self.tmp, "b.gguf")
        n = 1 << 24   # 64 MiB of zeros per tensor, sparse
        for path in (a, b):
            out = b"GGUF" + struct.pack("<IQQ", 3, 8, 1) + gguf_str(b"general.architecture")
            out += struct.pack("<I", 8) + gguf_str(b"x")
            for k in range(8):
                out += gguf_str(b"t%d" % k) + struct.pack("<IQIQ", 1, n, 0, 4 * n * k)
            out += b"\0" * ((32 - len(out) % 32) % 32)
            with open(path, "wb") as f:
                f.write(out)
                f.truncate(len(out) + 8 * 4 * n)
        header = os.path.getsize(b) - 8 * 4 * n
        p = subprocess.Popen([gm.GGUFS, "--diff", a, b], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # stopped as soon as B is mapped, shrunk to its header and first tensor, let go
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with open("/proc/%d/maps" % p.pid) as f:
                    if b in f.read():
                        break
            except FileNotFoundError:
                break
        os.kill(p.pid, signal.SIGSTOP)
        os.truncate(b, header + 4 * n)
        os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 3, err)
        self.assertEqual(out, b"")
        lines = err.decode().splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertRegex(lines[0], r"^ggufs: %s: tensor 't[1-7]': cannot read: Input/output error$"
                         % b.replace(".", r"\."))


if __name__ == "__main__":
    gm.main(diff_pair=True)
