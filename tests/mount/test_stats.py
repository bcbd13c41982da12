#!/usr/bin/env python3
"""Tensor health through a real mount and from the command line: stats/NAME and
stats.tsv against numpy over the .f32 files (every type of the vectors model), planted
faults found with the right counts by both stats/ and `ggufs --check` (text and JSON),
a clean model found clean, a split model scanned whole, and bad input and arguments
refused with the statuses of ggufs(1)."""
import collections
import csv
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import tempfile
import unittest

import numpy as np

import ggufs_mount as gm

ALLTYPES = os.path.join(gm.VECTORS, "alltypes.gguf")
KEYS = ["elements", "min", "max", "mean", "std", "absmax", "nan", "pos_inf", "neg_inf",
        "zeros", "subnormals", "bad_blocks"]
F32_KEYS = ("min", "max", "absmax")
F64_KEYS = ("mean", "std")

# Where ggml_validate_row_data finds each type's fp16 scales: (block bytes, offsets),
# written from ggml's block structs; mxfp4, iq1_m and nvfp4 have rules of their own.
F16_SCALES = {
    "q4_0": (18, [0]), "q4_1": (20, [0, 2]), "q5_0": (22, [0]), "q5_1": (24, [0, 2]),
    "q8_0": (34, [0]), "q2_K": (84, [80, 82]), "q3_K": (110, [108]),
    "q4_K": (144, [0, 2]), "q5_K": (176, [0, 2]), "q6_K": (210, [208]),
    "iq2_xxs": (66, [0]), "iq2_xs": (74, [0]), "iq2_s": (82, [0]), "iq3_xxs": (98, [0]),
    "iq3_s": (110, [0]), "iq1_s": (50, [0]), "iq4_nl": (18, [0]), "iq4_xs": (136, [0]),
    "tq1_0": (54, [52]), "tq2_0": (66, [64]), "q1_0": (18, [0]), "q2_0": (18, [0]),
}
NO_SCALES = {"f32", "f16", "bf16", "f64", "i8", "i16", "i32", "i64"}


def bad_blocks(gtype, raw):
    """Blocks whose scales ggml's row validation rejects, or None for a type without
    block scales."""
    if gtype in NO_SCALES:
        return None
    if gtype == "nvfp4":
        return 0
    if gtype == "mxfp4":
        return sum(1 for k in range(0, len(raw), 17) if raw[k] == 0xFF)
    if gtype == "iq1_m":
        bad = 0
        for k in range(0, len(raw), 56):
            sc = struct.unpack_from("<4H", raw, k + 48)
            h = (sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000)
            bad += (h & 0x7C00) == 0x7C00
        return bad
    size, offsets = F16_SCALES[gtype]
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, size)
    bad = np.zeros(len(blocks), dtype=bool)
    for o in offsets:
        h = blocks[:, o].astype(np.uint16) | (blocks[:, o + 1].astype(np.uint16) << 8)
        bad |= (h & 0x7C00) == 0x7C00
    return int(bad.sum())


def parse_stats(text):
    """The key -> value text of a stats/NAME file, checking its shape on the way."""
    lines = text.split("\n")
    assert lines[-1] == "", "ends in a newline"
    out = {}
    for line, key in zip(lines[:-1], KEYS):
        m = re.fullmatch(r"(\S+) (\S+) *", line)
        assert m, repr(line)
        assert m.group(1) == key, (m.group(1), key)
        out[key] = m.group(2)
    assert len(lines) - 1 == len(KEYS), text
    return out


def expected(values, gtype, raw):
    """Every figure of stats/NAME from numpy, over float32 values."""
    finite = np.isfinite(values)
    f = values[finite].astype(np.float64)
    tiny = np.finfo(np.float32).tiny
    e = {
        "elements": values.size,
        "nan": int(np.isnan(values).sum()),
        "pos_inf": int(np.isposinf(values).sum()),
        "neg_inf": int(np.isneginf(values).sum()),
        "zeros": int((values == 0).sum()),
        "subnormals": int((finite & (values != 0) & (np.abs(values) < tiny)).sum()),
        "bad_blocks": bad_blocks(gtype, raw),
    }
    if f.size:
        e.update(min=f.min(), max=f.max(), absmax=np.abs(f).max(), mean=f.mean(),
                 std=f.std(), abs_mean=np.abs(f).mean())
    return e


class StatsCase(unittest.TestCase):
    def check_file(self, mnt, name):
        """stats/name against numpy over tensors/name.f32; returns the parsed file."""
        path = os.path.join(mnt, "stats", name)
        text = gm.read_file(path).decode()
        self.assertEqual(os.stat(path).st_size, len(text))
        got = parse_stats(text)
        values = np.fromfile(os.path.join(mnt, "tensors", name + ".f32"), dtype="<f4")
        raw = gm.read_file(os.path.join(mnt, "tensors", name))
        gtype = os.getxattr(os.path.join(mnt, "tensors", name), "user.gguf.type").decode()
        want = expected(values, gtype, raw)
        for key in ("elements", "nan", "pos_inf", "neg_inf", "zeros", "subnormals"):
            self.assertEqual(int(got[key]), want[key], (name, key))
        self.assertEqual(got["bad_blocks"],
                         "-" if want["bad_blocks"] is None else str(want["bad_blocks"]), name)
        if "min" not in want:
            for key in F32_KEYS + F64_KEYS:
                self.assertEqual(got[key], "nan", (name, key))
            return got
        for key in F32_KEYS:
            # float32 figures: exact, and written as metadata/ writes a float32 (a zero
            # as 0, whatever the sign of the zeros it stands for)
            self.assertEqual(np.float32(got[key]), np.float32(want[key]), (name, key))
            self.assertEqual(got[key], gm.shortest_float(abs(want[key]) if want[key] == 0
                                                         else float(want[key]), 32), (name, key))
        for key in F64_KEYS:
            v = float(got[key])
            self.assertEqual(got[key], gm.shortest_float(v, 64), (name, key))
        scale = max(want["abs_mean"], 1e-300)
        self.assertLessEqual(abs(float(got["mean"]) - want["mean"]), 1e-14 * scale, name)
        self.assertLessEqual(abs(float(got["std"]) - want["std"]), 1e-13 * want["std"] + 1e-300,
                             name)
        return got

    def check_tsv(self, mnt, files):
        """stats.tsv: the header, then each stats/ file's figures on its line, exact
        (no padding in or after a field), then only empty lines up to its size; and
        TSV tools read it so: cut, awk -F'\\t', Python's csv."""
        path = os.path.join(mnt, "stats.tsv")
        text = gm.read_file(path).decode()
        self.assertEqual(os.stat(path).st_size, len(text))
        body = text.rstrip("\n") + "\n"
        self.assertGreater(len(text), len(body), "the padding is there, as empty lines")
        lines = body.split("\n")[:-1]
        self.assertEqual(lines[0], "\t".join(["tensor"] + KEYS))
        self.assertEqual([l.split("\t")[0] for l in lines[1:]], list(files))
        for line in lines[1:]:
            self.assertNotRegex(line, r"(^|\t) | (\t|$)", "padding in a field: %r" % line)
            fields = line.split("\t")
            self.assertEqual(len(fields), 1 + len(KEYS), line)
            self.assertEqual(dict(zip(KEYS, fields[1:])), files[fields[0]])
        # Python's csv: one row per tensor, every value as stats/NAME has it
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        self.assertEqual([r["tensor"] for r in rows], list(files))
        for r in rows:
            self.assertEqual({k: r[k] for k in KEYS}, files[r["tensor"]])
            self.assertNotIn(None, r, "no field past the header's")
        # cut: a column's equal values are one value (padding made each line's differ)
        col = KEYS.index("bad_blocks") + 2
        got = subprocess.run("cut -f%d %s | grep . | sort | uniq -c" % (col, shlex.quote(path)),
                             shell=True, capture_output=True, text=True, check=True).stdout
        want = collections.Counter(v["bad_blocks"] for v in files.values())
        want["bad_blocks"] += 1
        self.assertEqual({l.split()[1]: int(l.split()[0]) for l in got.splitlines()}, want)
        # awk -F'\t': a string test on a field, and a numeric one
        for prog, pick in (('$%d == "-"' % col, lambda v: v["bad_blocks"] == "-"),
                           ('NR > 1 && $%d > 0' % (KEYS.index("elements") + 2),
                            lambda v: True)):
            got = subprocess.run(["awk", "-F\t", prog + " { print $1 }", path],
                                 capture_output=True, text=True, check=True).stdout
            self.assertEqual(got.splitlines(), [n for n, v in files.items() if pick(v)], prog)


class Vectors(StatsCase):
    """Every type of the shared vectors, random block bytes included."""

    def test_every_file_against_numpy(self):
        with gm.Mount(ALLTYPES) as m:
            names = os.listdir(m.p("stats"))
            self.assertEqual(sorted(names),
                             sorted(n for n in os.listdir(m.p("tensors"))
                                    if not n.endswith((".f32", ".npy"))))
            files = {}
            for name in sorted(names):
                files[name] = self.check_file(m.path, name)
            # statfs counts the inode numbers the stats files take
            inos = [os.stat(m.p("stats", n)).st_ino for n in names]
            self.assertEqual(len(set(inos)), len(inos))
            self.assertLess(max(inos), os.statvfs(m.path).f_files)
            order = [l.split("\t")[0] for l in
                     gm.read_file(m.p("stats.tsv")).decode().rstrip("\n").split("\n")[1:]]
            self.check_tsv(m.path, {n: files[n] for n in order})
            # the random block bytes hold NaN scales: found in stats/ as in the raw bytes
            self.assertGreater(sum(int(f["bad_blocks"]) for f in files.values()
                                   if f["bad_blocks"] != "-"), 0)


# ---- models with planted faults ----

def f16(values):
    return np.asarray(values, dtype="<f2").tobytes()


def bf16(values):
    return (np.asarray(values, dtype="<f4").view("<u4") >> 16).astype("<u2").tobytes()


def blocks(gtype, n, scale_at, bad_block=None, extra_at=()):
    """n blocks of random quants with fp16 scales 2^-8, one of them NaN if asked."""
    size = F16_SCALES[gtype][0]
    rng = np.random.default_rng(n * 1000 + size)
    b = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    for k in range(n):
        for at in (scale_at,) + tuple(extra_at):
            b[k, at:at + 2] = (0x00, 0x1C)
        if k == bad_block:
            b[k, scale_at:scale_at + 2] = (0x00, 0x7E)
    return b.tobytes()


GGML = {"f32": 0, "f16": 1, "q8_0": 8, "q4_K": 12, "q6_K": 14, "bf16": 30}

# name -> (type, ne0, {figure: count}); the figures not named are 0 (zeros: unchecked
# in the quantized ones, whose random quants can be 0)
PLANTED = {
    "f32.nan": ("f32", 512, {"nan": 3}),
    "f16.inf": ("f16", 512, {"pos_inf": 2}),
    "bf16.inf": ("bf16", 512, {"pos_inf": 3}),
    "q4_K.nan_scale": ("q4_K", 1024, {"nan": 256, "bad_blocks": 1}),
    "q6_K.nan_scale": ("q6_K", 512, {"nan": 256, "bad_blocks": 1}),
    "q8_0.nan_scale": ("q8_0", 512, {"nan": 32, "bad_blocks": 1}),
    "f32.zero": ("f32", 512, {"zeros": 512}),
    "f32.subnormal": ("f32", 512, {"subnormals": 7}),
}
UNHEALTHY = {n for n, (_, _, c) in PLANTED.items() if set(c) & {"nan", "pos_inf", "bad_blocks"}}
WARNED = {"f32.zero", "f32.subnormal"}


def tensor_bytes(name, faults):
    gtype, ne0, _ = PLANTED[name]
    rng = np.random.default_rng(len(name))
    v = (rng.standard_normal(ne0) * 0.5).astype("<f4")
    v[np.abs(v) < 1e-3] = 0.25
    if not faults:
        pass
    elif name == "f32.nan":
        v[[1, 200, 511]] = np.nan
    elif name == "f16.inf":
        v[[10, 11]] = np.inf
    elif name == "bf16.inf":
        v[[0, 300, 511]] = np.inf
    elif name == "f32.zero":
        v[:] = 0.0
        v[::3] = -0.0
    elif name == "f32.subnormal":
        v[0:490:70] = np.float32(1e-40)
    if gtype == "f32":
        return v.tobytes()
    if gtype == "f16":
        return f16(v)
    if gtype == "bf16":
        return bf16(v)
    bad = 1 if faults else None
    if gtype == "q4_K":
        return blocks("q4_K", ne0 // 256, 0, bad, extra_at=(2,))
    if gtype == "q6_K":
        return blocks("q6_K", ne0 // 256, 208, bad)
    return blocks("q8_0", ne0 // 32, 0, bad)


def tensors(faults, names=None):
    return [(n, [PLANTED[n][1]], GGML[PLANTED[n][0]], tensor_bytes(n, faults))
            for n in (names or PLANTED)]


def write_model(path, faults):
    gm.write_gguf(path, [("general.architecture", "test")], tensors(faults))


class Planted(StatsCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ggufs-test-")
        cls.faulty = os.path.join(cls.tmp, "faulty.gguf")
        cls.clean = os.path.join(cls.tmp, "clean.gguf")
        write_model(cls.faulty, True)
        write_model(cls.clean, False)
        # the tensor bytes checked, in the unit that suits them: three f32 of 512 values
        # (6144), f16 and bf16 (2048), q4_K 4 blocks of 144, q6_K 2 of 210, q8_0 16 of 34
        cls.size_text = "9.73 KB"   # 6144 + 2048 + 576 + 420 + 544 = 9732 bytes

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def check_stats(self, model, faults):
        with gm.Mount(model) as m:
            files = {}
            for name, (_, _, counts) in PLANTED.items():
                got = self.check_file(m.path, name)
                files[name] = got
                for key in ("nan", "pos_inf", "neg_inf", "subnormals", "bad_blocks"):
                    if got[key] == "-":
                        continue
                    self.assertEqual(int(got[key]), counts.get(key, 0) if faults else 0,
                                     (name, key))
                if name == "f32.zero":
                    self.assertEqual(got["zeros"], "512" if faults else "0")
            self.check_tsv(m.path, files)

    def test_stats_find_the_faults(self):
        self.check_stats(self.faulty, True)

    def test_stats_clean(self):
        self.check_stats(self.clean, False)

    def check_text(self, model):
        r = gm.run_ggufs(["--check", model])
        out = r.stdout.decode().splitlines()
        self.assertEqual(r.stderr, b"")  # not a terminal: no progress
        return r.returncode, out

    def test_check_finds_the_faults(self):
        status, out = self.check_text(self.faulty)
        self.assertEqual(status, 1, out)
        bad = {l.split(" ")[1]: l for l in out if l.startswith("unhealthy: ")}
        warned = {l.split(" ")[1]: l for l in out if l.startswith("warning: ")}
        self.assertEqual(set(bad), UNHEALTHY)
        self.assertEqual(set(warned), WARNED)
        self.assertIn("(f32): 3 NaN of 512 values", bad["f32.nan"])
        self.assertIn("(f16): 2 +inf of 512 values", bad["f16.inf"])
        self.assertIn("(bf16): 3 +inf of 512 values", bad["bf16.inf"])
        self.assertIn("(q4_K): 256 NaN of 1024 values; 1 of 4 blocks with a NaN or infinite"
                      " scale", bad["q4_K.nan_scale"])
        self.assertIn("(q6_K): 256 NaN of 512 values; 1 of 2 blocks", bad["q6_K.nan_scale"])
        self.assertIn("(q8_0): 32 NaN of 512 values; 1 of 16 blocks", bad["q8_0.nan_scale"])
        self.assertIn("all 512 values are zero", warned["f32.zero"])
        self.assertIn("7 of 512 values are subnormal", warned["f32.subnormal"])
        self.assertEqual(out[-1], "%s: 8 tensors checked (%s): 6 unhealthy, 2 with warnings"
                         % (self.faulty, self.size_text))
        self.assertEqual(len(out), 9)

    def test_check_clean(self):
        status, out = self.check_text(self.clean)
        self.assertEqual(status, 0, out)
        self.assertEqual(out, ["%s: 8 tensors checked (%s): 0 unhealthy, 0 with warnings"
                               % (self.clean, self.size_text)])

    def test_check_sizes(self):
        """Sizes in the unit that suits them (three figures), in the summary line and in
        the progress line on a terminal: never "(0.00 GB)" for a small model."""
        import pty
        import subprocess
        r = gm.run_ggufs(["--check", gm.TINY])
        last = r.stdout.decode().splitlines()[-1]
        self.assertIn(" tensors checked (3.74 MB): ", last)   # 3,74x,xxx tensor bytes
        # stderr on a terminal: at least one progress line, its sizes in MB too
        leader, follower = pty.openpty()
        try:
            p = subprocess.run([gm.GGUFS, "--check", gm.TINY], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=follower,
                               timeout=gm.MOUNT_TIMEOUT)
            os.close(follower)
            follower = -1
            self.assertEqual(p.returncode, 0)
            err = b""
            while True:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:   # EIO: the terminal's other end is closed
                    break
                if not chunk:
                    break
                err += chunk
        finally:
            os.close(leader)
            if follower >= 0:
                os.close(follower)
        progress = [l for l in err.decode().split("\r") if l.startswith("ggufs: checking:")]
        self.assertTrue(progress, err)
        self.assertRegex(progress[-1], r"^ggufs: checking: [\d.]+ (bytes|KB|MB) / 3\.74 MB "
                         r"\( *\d+%\), [\d.]+ (bytes|KB|MB|GB|TB)/s $")
        self.assertNotIn("0.00 GB", err.decode())

    def test_several_models(self):
        """--check A B C: one block of lines per model, in order, each ending with its
        summary line, blocks apart by an empty line; a model that cannot be opened has
        its one line on stderr and the rest are still checked; the status is the
        worst. With --json: a JSON array of the reports."""
        missing = os.path.join(self.tmp, "missing.gguf")
        r = gm.run_ggufs(["--check", self.clean, self.faulty, missing, self.clean])
        self.assertEqual(r.returncode, 3)
        self.assertEqual(r.stderr.decode(), "ggufs: %s: %s\n" % (missing, os.strerror(2)))
        blocks = [b.splitlines() for b in r.stdout.decode().split("\n\n")]
        self.assertEqual([b[-1].split(":")[0] for b in blocks],
                         [self.clean, self.faulty, self.clean])
        self.assertEqual(blocks[0], self.check_text(self.clean)[1])
        self.assertEqual(blocks[1], self.check_text(self.faulty)[1])
        self.assertEqual(blocks[2], blocks[0])
        r = gm.run_ggufs(["--check", self.faulty, self.clean])
        self.assertEqual(r.returncode, 1)
        r = gm.run_ggufs(["--check", self.clean, self.clean])
        self.assertEqual(r.returncode, 0)
        r = gm.run_ggufs(["--check", "--json", self.faulty, self.clean])
        self.assertEqual(r.returncode, 1)
        reports = json.loads(r.stdout)
        self.assertEqual([x["file"] for x in reports], [self.faulty, self.clean])
        for x, path in zip(reports, (self.faulty, self.clean)):
            self.assertEqual(x, json.loads(gm.run_ggufs(["--check", "--json", path]).stdout))

    def test_json(self):
        for model, faults in ((self.faulty, True), (self.clean, False)):
            r = gm.run_ggufs(["--check", "--json", model])
            self.assertEqual(r.returncode, 1 if faults else 0)
            report = json.loads(r.stdout)
            self.assertEqual(report["file"], model)
            self.assertEqual(report["healthy"], not faults)
            self.assertEqual(report["unhealthy"], len(UNHEALTHY) if faults else 0)
            self.assertEqual(report["warnings"], len(WARNED) if faults else 0)
            self.assertEqual([t["name"] for t in report["tensors"]], list(PLANTED))
            with gm.Mount(model) as m:
                for t in report["tensors"]:
                    name = t["name"]
                    gtype, ne0, counts = PLANTED[name]
                    self.assertEqual(t["type"], gtype)
                    self.assertEqual(t["stats"], "stats/" + name)
                    want = "unhealthy" if faults and name in UNHEALTHY else \
                        "warning" if faults and name in WARNED else "ok"
                    self.assertEqual(t["status"], want, name)
                    for key in ("nan", "pos_inf", "neg_inf", "subnormals"):
                        self.assertEqual(t[key], counts.get(key, 0) if faults else 0, (name, key))
                    if gtype in NO_SCALES:
                        self.assertIsNone(t["bad_blocks"])
                        self.assertIsNone(t["blocks"])
                    else:
                        self.assertEqual(t["bad_blocks"], counts.get("bad_blocks", 0) * faults)
                        self.assertEqual(t["blocks"], len(tensor_bytes(name, faults)) //
                                         F16_SCALES[gtype][0])
                    # the same figures as the tree's file
                    got = parse_stats(gm.read_file(m.p(t["stats"])).decode())
                    for key in KEYS:
                        v = t[key]
                        if v is None:
                            self.assertIn(got[key], ("-", "nan"), (name, key))
                        elif isinstance(v, int):
                            self.assertEqual(str(v), got[key], (name, key))
                        else:
                            self.assertEqual(v, float(got[key]), (name, key))

    def test_split_model(self):
        """Both shards of a split model are scanned, from either shard's name."""
        d = tempfile.mkdtemp(prefix="ggufs-test-", dir=self.tmp)
        names = list(PLANTED)
        halves = [names[:4], names[4:]]
        for i, part in enumerate(halves):
            kvs = [("general.architecture", "test"), ("split.no", i), ("split.count", 2),
                   ("split.tensors.count", len(names))]
            gm.write_gguf(os.path.join(d, "m-%05d-of-00002.gguf" % (i + 1)), kvs,
                          tensors(True, part))
        for shard in (1, 2):
            r = gm.run_ggufs(["--check", os.path.join(d, "m-%05d-of-00002.gguf" % shard)])
            self.assertEqual(r.returncode, 1, r.stderr)
            out = r.stdout.decode().splitlines()
            self.assertEqual({l.split(" ")[1] for l in out if l.startswith("unhealthy: ")},
                             UNHEALTHY)
            self.assertIn("8 tensors checked", out[-1])


class Segments(StatsCase):
    """A tensor of several segments (lib/4-stats/stats.h: 2^22 values each), whose segments
    --check computes on two threads at once and stats/ one after the other: the same
    figures, bit for bit, and numpy's."""

    def test_large_tensor(self):
        tmp = tempfile.mkdtemp(prefix="ggufs-test-")
        try:
            path = os.path.join(tmp, "big.gguf")
            ne0, ne1 = 4096, 3100   # 12.7 M values: four segments, the last one short
            rng = np.random.default_rng(7)
            b = rng.integers(0, 256, size=(ne0 * ne1 // 32, 34), dtype=np.uint8)
            b[:, 0:2] = (0x00, 0x1C)          # d = 2^-8
            b[-5, 0:2] = (0x00, 0x7C)         # +inf scale in the last segment
            small = (rng.standard_normal(4096) + 3).astype("<f4")
            gm.write_gguf(path, [("general.architecture", "test")],
                          [("small", [4096], GGML["f32"], small.tobytes()),
                           ("big", [ne0, ne1], GGML["q8_0"], b.tobytes())])
            r = gm.run_ggufs(["--check", "--json", path])
            self.assertEqual(r.returncode, 1, r.stderr)
            report = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
            big = report["big"]
            self.assertEqual(big["status"], "unhealthy")
            self.assertEqual(big["bad_blocks"], 1)
            self.assertEqual(big["blocks"], ne0 * ne1 // 32)
            with gm.Mount(path) as m:
                for name, t in report.items():
                    got = self.check_file(m.path, name)
                    for key in KEYS:
                        if t[key] is None:
                            self.assertIn(got[key], ("-", "nan"))
                        else:
                            self.assertEqual(t[key], json.loads(got[key]), (name, key))
        finally:
            shutil.rmtree(tmp)


class BadInput(gm.ScratchCase):
    must_not_mount = True

    def same_line_as_mount(self, path):
        mount = gm.run_ggufs([path, self.mnt])
        check = gm.run_ggufs(["--check", path])
        self.assertEqual(mount.returncode, 1)
        self.assertEqual(check.returncode, 3)
        self.assertEqual(check.stdout, b"")
        lines = check.stderr.decode().splitlines()
        self.assertEqual(len(lines), 1, check.stderr)
        self.assertTrue(lines[0].startswith("ggufs: " + path), lines[0])
        self.assertEqual(check.stderr, mount.stderr)
        return lines[0]

    def test_truncated(self):
        path = os.path.join(self.tmp, "cut.gguf")
        write_model(path, True)
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 100)
        self.assertIn("past the end", self.same_line_as_mount(path))

    def test_lying_count(self):
        path = os.path.join(self.tmp, "lies.gguf")
        write_model(path, False)
        with open(path, "r+b") as f:
            f.seek(8)
            f.write(struct.pack("<Q", 1 << 40))  # tensor count
        self.same_line_as_mount(path)

    def test_missing(self):
        self.same_line_as_mount(os.path.join(self.tmp, "missing.gguf"))

    def test_usage(self):
        model = os.path.join(self.tmp, "m.gguf")
        write_model(model, False)
        for args in (["--check"], ["--check", model, ""], ["--json", model],
                     ["--check", "-f", model], ["--json"]):
            r = gm.run_ggufs(args)
            self.assertEqual(r.returncode, 2, args)
            self.assertEqual(r.stdout, b"")
            lines = r.stderr.decode().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertTrue(lines[0].startswith("ggufs: "), lines[0])


if __name__ == "__main__":
    gm.main()
