#!/usr/bin/env python3
"""quants/NAME.gguf's plan (lib/2-model/quant_plan.h) against llama.cpp's quantizer
itself (issue 36): for every NAME and a set of models made here, llama_model_quantize()
of the libllama that tests/llama pins (default parameters, ftype NAME, called through
ctypes) writes a file, and quant_plan_dump writes what ggufs makes of the same model
(quant_plan.h, quant_read.h). Both agree on whether the file is made at all; when it
is, on every byte: the header (keys, tensor order, types, dimensions, offsets,
padding), the file's size, the zeros after every tensor, the bytes of every tensor
whose type stays and of every tensor quantized (the types lib/2-quant makes: a file
with a type it does not make yet is compared without that tensor's bytes).

The models: the bundled model rewritten by llama.cpp as F16, BF16 and F32; random
llamas with rows that are not multiples of 256 (nor, for one tensor, of 32), grouped
query attention, 12 layers in a shuffled file order, booleans and the keys llama.cpp
replaces in the middle; a random llama of 256-wide rows with tied embeddings and
general.alignment 64; a mixture of 8 experts (3-D expert tensors, ffn_gate_inp); an
80-layer llama with GQA, which llama.cpp takes for a 70B; and the bundled Q4_K_M model
itself, with and without allow_requantize.

Usage: test_quant_plan.py QUANT_PLAN_DUMP. Skipped (77) without the installed
node-llama-cpp package, unless GGUFS_REQUIRE_LLAMA is set."""
import ctypes
import glob
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, "..", "mount"))
from ggufs_mount import sha256_file  # noqa: E402,F401 (the quant tests' qp.sha256_file)
BINS = os.path.join(HERE, "..", "llama", "node_modules", "@node-llama-cpp", "linux-x64",
                    "bins", "linux-x64")
TINY = os.path.join(os.environ.get("GGUFS_TEST_DATA", os.path.join(HERE, "..", "data")),
                    "tinyllama-q4km.gguf")
DUMP = None

# llama-quantize's names and llama.cpp's ftype numbers (include/llama.h)
NAMES = [("F32", 0), ("F16", 1), ("BF16", 32), ("Q8_0", 7), ("Q6_K", 18), ("Q5_K_M", 17),
         ("Q5_K_S", 16), ("Q5_1", 9), ("Q5_0", 8), ("Q4_K_M", 15), ("Q4_K_S", 14),
         ("Q4_1", 3), ("Q4_0", 2), ("Q3_K_L", 13), ("Q3_K_M", 12), ("Q3_K_S", 11),
         ("Q2_K", 10), ("IQ4_XS", 30), ("IQ4_NL", 25), ("IQ3_M", 27), ("IQ3_S", 26),
         ("TQ2_0", 37), ("TQ1_0", 36), ("MXFP4_MOE", 38), ("Q2_0", 41), ("Q1_0", 40)]
FTYPE = dict(NAMES)

F32, F16, BF16 = 0, 1, 30


class QuantizeParams(ctypes.Structure):
    """llama_model_quantize_params of this llama.cpp (include/llama.h)."""
    _fields_ = [("nthread", ctypes.c_int32), ("ftype", ctypes.c_int32),
                ("output_tensor_type", ctypes.c_int32),
                ("token_embedding_type", ctypes.c_int32),
                ("allow_requantize", ctypes.c_bool), ("quantize_output_tensor", ctypes.c_bool),
                ("only_copy", ctypes.c_bool), ("pure", ctypes.c_bool),
                ("keep_split", ctypes.c_bool), ("dry_run", ctypes.c_bool),
                ("imatrix", ctypes.c_void_p), ("kv_overrides", ctypes.c_void_p),
                ("tt_overrides", ctypes.c_void_p), ("prune_layers", ctypes.c_void_p),
                ("max_buf_size", ctypes.c_size_t)]


LOG_CB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class Llama:
    """libllama, quiet."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        self.lib.llama_model_quantize_default_params.restype = QuantizeParams
        self.lib.llama_model_quantize.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                                  ctypes.POINTER(QuantizeParams)]
        self.lib.llama_model_quantize.restype = ctypes.c_uint32
        self.quiet = LOG_CB(lambda level, text, ud: None)
        self.lib.llama_log_set(self.quiet, None)
        self.lib.llama_backend_init()

    def quantize(self, src, dst, ftype, requantize=False):
        """llama_model_quantize(src, dst) with the default parameters but ftype (and
        allow_requantize): 0 when it wrote dst."""
        p = self.lib.llama_model_quantize_default_params()
        p.ftype = ftype
        p.nthread = 2
        p.allow_requantize = requantize
        return self.lib.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))


def find_libllama():
    """libllama's path, or None."""
    found = sorted(glob.glob(os.path.join(BINS, "libllama*.so")))
    return found[0] if found else None


# ---- GGUF files written here ----

VT = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7,
      "str": 8, "arr": 9, "u64": 10, "i64": 11, "f64": 12}
PACK = {"u8": "<B", "i8": "<b", "u16": "<H", "i16": "<h", "u32": "<I", "i32": "<i",
        "f32": "<f", "bool": "<B", "u64": "<Q", "i64": "<q", "f64": "<d"}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gvalue(vtype, value):
    if vtype == "str":
        return gstr(value)
    return struct.pack(PACK[vtype], value)


def write_gguf(path, kvs, tensors, alignment=32):
    """A GGUF v3 file: kvs [(key, type, value)], an array's type ("arr", elem type) with
    a list; tensors [(name, shape, ggml type, bytes)], data in the order listed."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, vtype, value in kvs:
        out += gstr(key)
        if isinstance(vtype, tuple):
            out += struct.pack("<IIQ", VT["arr"], VT[vtype[1]], len(value))
            out += b"".join(gvalue(vtype[1], v) for v in value)
        else:
            out += struct.pack("<I", VT[vtype]) + gvalue(vtype, value)
    off, offsets = 0, []
    for _, _, _, data in tensors:
        offsets.append(off)
        off += len(data) + (-len(data) % alignment)
    for (name, shape, gtype, _), toff in zip(tensors, offsets):
        out += gstr(name) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<IQ", gtype, toff)
    out += b"\0" * (-len(out) % alignment)
    with open(path, "wb") as f:   # piece by piece: one bytes of it all is slow to grow
        f.write(out)
        for _, _, _, data in tensors:
            f.write(data)
            f.write(b"\0" * (-len(data) % alignment))


def store(values, gtype):
    """float32 values as F32, F16 or BF16 bytes."""
    v = numpy.asarray(values, dtype=numpy.float32)
    if gtype == F32:
        return v.tobytes()
    if gtype == F16:
        return v.astype(numpy.float16).tobytes()
    u = v.view(numpy.uint32).astype(numpy.uint64)
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(numpy.uint16).tobytes()


def random_llama(path, seed, n_embd, n_ff, n_layer, n_head, n_head_kv, n_vocab, gtype,
                 tied=False, n_expert=0, alignment=32, shuffle=False, extra=(), arch="llama",
                 kv_edit=None):
    """A llama of random weights stored as gtype (norms F32), that llama.cpp loads the
    hyperparameters of. extra: more (name, shape) tensors. arch: general.architecture
    and the prefix of the llama keys. kv_edit: a function of the keys [(key, type,
    value)] giving those written."""
    rng = numpy.random.default_rng(seed)
    head_dim = n_embd // n_head
    shapes = [("token_embd.weight", [n_embd, n_vocab]), ("output_norm.weight", [n_embd])]
    if not tied:
        shapes.append(("output.weight", [n_embd, n_vocab]))
    for i in range(n_layer):
        b = "blk.%d." % i
        shapes += [(b + "attn_norm.weight", [n_embd]),
                   (b + "attn_q.weight", [n_embd, n_embd]),
                   (b + "attn_k.weight", [n_embd, head_dim * n_head_kv]),
                   (b + "attn_v.weight", [n_embd, head_dim * n_head_kv]),
                   (b + "attn_output.weight", [n_embd, n_embd]),
                   (b + "ffn_norm.weight", [n_embd])]
        if n_expert:
            shapes += [(b + "ffn_gate_inp.weight", [n_embd, n_expert]),
                       (b + "ffn_gate_exps.weight", [n_embd, n_ff, n_expert]),
                       (b + "ffn_up_exps.weight", [n_embd, n_ff, n_expert]),
                       (b + "ffn_down_exps.weight", [n_ff, n_embd, n_expert])]
        else:
            shapes += [(b + "ffn_gate.weight", [n_embd, n_ff]),
                       (b + "ffn_up.weight", [n_embd, n_ff]),
                       (b + "ffn_down.weight", [n_ff, n_embd])]
    shapes += list(extra)
    if shuffle:
        order = rng.permutation(len(shapes))
        shapes = [shapes[i] for i in order]
    tensors = []
    for name, shape in shapes:
        n = int(numpy.prod(shape))
        vals = rng.standard_normal(n, dtype=numpy.float32) * numpy.float32(0.05)
        t = F32 if len(shape) == 1 or name.endswith("ffn_gate_inp.weight") else gtype
        tensors.append((name, shape, t, store(vals, t)))
    kvs = [("general.architecture", "str", "llama"),
           ("general.name", "str", "random %d" % seed)]
    if alignment != 32:
        kvs.append(("general.alignment", "u32", alignment))
    kvs += [("general.file_type", "u32", 1),
            ("llama.context_length", "u32", 256),
            ("llama.embedding_length", "u32", n_embd),
            ("llama.feed_forward_length", "u32", n_ff),
            ("llama.block_count", "u32", n_layer),
            ("llama.attention.head_count", "u32", n_head),
            ("llama.attention.head_count_kv", "u32", n_head_kv),
            ("llama.attention.layer_norm_rms_epsilon", "f32", 1e-5),
            ("general.quantization_version", "u32", 2),
            ("llama.rope.dimension_count", "u32", head_dim)]
    if n_expert:
        kvs += [("llama.expert_count", "u32", n_expert), ("llama.expert_used_count", "u32", 2)]
    kvs += [("tokenizer.ggml.model", "str", "llama"),
            ("tokenizer.ggml.tokens", ("arr", "str"), ["t%d" % i for i in range(n_vocab)]),
            ("tokenizer.ggml.add_bos_token", "bool", 1),
            ("test.flags", ("arr", "bool"), [1, 0, 1]),
            ("test.scale", "f64", 0.125)]
    if arch != "llama":
        kvs = [("general.architecture", t, arch) if k == "general.architecture"
               else (arch + k[5:] if k.startswith("llama.") else k, t, v) for k, t, v in kvs]
    if kv_edit:
        kvs = kv_edit(kvs)
    write_gguf(path, kvs, tensors, alignment)


def parse_infos(data, with_end=False):
    """The tensor infos of a GGUF v3 image: [(name, dims, type, offset)]; with_end, and
    where they end: (infos, end)."""
    pos = 24
    n_t, n_kv = struct.unpack_from("<QQ", data, 8)

    def skip(vtype):
        nonlocal pos
        if vtype == VT["str"]:
            (n,) = struct.unpack_from("<Q", data, pos)
            pos += 8 + n
        elif vtype == VT["arr"]:
            et, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            for _ in range(n):
                skip(et)
        else:
            pos += struct.calcsize(PACK[[k for k, v in VT.items() if v == vtype][0]])
    for _ in range(n_kv):
        skip(VT["str"])
        (vt,) = struct.unpack_from("<I", data, pos)
        pos += 4
        skip(vt)
    infos = []
    for _ in range(n_t):
        (n,) = struct.unpack_from("<Q", data, pos)
        name = data[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        (nd,) = struct.unpack_from("<I", data, pos)
        dims = struct.unpack_from("<%dQ" % nd, data, pos + 4)
        pos += 4 + 8 * nd
        gt, off = struct.unpack_from("<IQ", data, pos)
        pos += 12
        infos.append((name, dims, gt, off))
    return (infos, pos) if with_end else infos


def tiny(llama, folder, ftype="F16"):
    """The bundled model rewritten by llama.cpp as ftype (F16, BF16, F32), at
    folder/tiny-FTYPE.gguf: its path."""
    path = os.path.join(folder, "tiny-%s.gguf" % ftype)
    assert llama.quantize(TINY, path, FTYPE[ftype], requantize=True) == 0
    return path


class QuantCase(unittest.TestCase):
    """What the quant tests' classes share: llama.cpp's quantizer (cls.llama) and a
    scratch folder (cls.dir, its name from PREFIX), removed after the class."""
    PREFIX = "ggufs-quant-"

    @classmethod
    def setUpClass(cls):
        cls.llama = Llama(find_libllama())
        cls.dir = tempfile.mkdtemp(prefix=cls.PREFIX)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)


class QuantPlan(QuantCase):
    PREFIX = "ggufs-quant-plan-"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.models = {name: tiny(cls.llama, cls.dir, name[5:])
                      for name in ("tiny-F16", "tiny-BF16", "tiny-F32")}

        def add(name, **kw):
            path = os.path.join(cls.dir, name + ".gguf")
            random_llama(path, **kw)
            cls.models[name] = path
        # rows of 96 and 160 (not multiples of 256), one of 40 (not of 32), n_gqa 4,
        # a 2-D tensor of one row and a 3-D one of one plane (their dims written less
        # the trailing ones), file order shuffled
        add("rand-gqa", seed=1, n_embd=96, n_ff=160, n_layer=12, n_head=8, n_head_kv=2,
            n_vocab=300, gtype=F16, shuffle=True,
            extra=[("blk.3.odd.weight", [40, 8]), ("blk.5.row.weight", [96, 1]),
                   ("blk.7.plane.weight", [96, 16, 1])])
        add("rand-256", seed=2, n_embd=256, n_ff=512, n_layer=8, n_head=4, n_head_kv=4,
            n_vocab=260, gtype=BF16, tied=True, alignment=64)
        add("rand-moe", seed=3, n_embd=256, n_ff=64, n_layer=4, n_head=4, n_head_kv=1,
            n_vocab=128, gtype=F32, n_expert=8)
        add("rand-70b", seed=4, n_embd=64, n_ff=64, n_layer=80, n_head=8, n_head_kv=2,
            n_vocab=64, gtype=F16)
        cls.exact = []

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        print("\nwhole files byte for byte llama.cpp's: %d (%s)" % (len(cls.exact),
              ", ".join(cls.exact)), file=sys.stderr)

    def check(self, model, name, requantize=False):
        """llama.cpp's file and the plan's agree; the count of converted tensors."""
        src = self.models.get(model, model)
        ref = os.path.join(self.dir, "ref.gguf")
        ours = os.path.join(self.dir, "ours.gguf")
        for p in (ref, ours):
            if os.path.exists(p):
                os.unlink(p)
        rc = self.llama.quantize(src, ref, FTYPE[name], requantize)
        r = subprocess.run([DUMP, src, name, ours] + (["requantize"] if requantize else []),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        what = "%s %s%s" % (model, name, " requantize" if requantize else "")
        if rc != 0:
            self.assertEqual(r.returncode, 3, "%s: llama.cpp refused, ggufs planned: %s"
                             % (what, r.stderr.decode()))
            return None
        self.assertEqual(r.returncode, 0, "%s: %s" % (what, r.stderr.decode()))
        lines = r.stdout.decode().splitlines()
        head = lines[0].split()
        size, data_offset = int(head[1]), int(head[3])
        with open(ref, "rb") as f:
            want = f.read()
        with open(ours, "rb") as f:
            got = f.read()
        self.assertEqual(len(want), size, "%s: file size" % what)
        if want[:data_offset] != got[:data_offset]:
            at = next(i for i in range(data_offset) if want[i] != got[i])
            wi, gi = parse_infos(want), parse_infos(got)
            diff = [(a, b) for a, b in zip(wi, gi) if a != b][:3]
            self.fail("%s: header differs from byte %d; first tensor infos that differ "
                      "(llama.cpp, ggufs): %s" % (what, at, diff))
        converted, partial = 0, False
        for line in lines[1:]:
            tname, gt, off, tsize, how = line.split()
            start = data_offset + int(off)
            end = start + int(tsize)
            pad = -int(tsize) % 32
            self.assertEqual(want[end:end + pad], b"\0" * pad, "%s: %s padding" % (what, tname))
            if how == "3":   # a type lib/2-quant does not make yet
                partial = True
                continue
            if want[start:end] != got[start:end]:
                at = next(i for i in range(start, end) if want[i] != got[i])
                self.fail("%s: %s (%s, type %s) differs from byte %d of %d" %
                          (what, tname, "copied" if how == "1" else "quantized", gt,
                           at - start, end - start))
            converted += how == "2"
        if not partial:
            self.assertEqual(want, got, what)
            self.exact.append(what)
        return converted

    def test_float_models(self):
        """Every NAME of the float models (a few NAMEs of the bundled model's BF16 and
        F32 rewrites, which take long): the same file but the converted tensors, or
        no file from either. llama.cpp has no fallback for Q1_0's 128-value blocks, so
        it refuses exactly the models with rows that are not multiples of 128."""
        refused = set()
        some = {"F32", "F16", "BF16", "Q8_0", "Q6_K", "Q4_K_M", "Q2_K", "IQ4_XS", "MXFP4_MOE"}
        only = os.environ.get("GGUFS_QUANT_MODELS")   # while working: some models only
        for model in sorted(self.models):
            if only and model not in only.split(","):
                continue
            for name, _ in NAMES:
                if model in ("tiny-BF16", "tiny-F32") and name not in some:
                    continue
                with self.subTest(model=model, name=name):
                    if self.check(model, name) is None:
                        refused.add((model, name))
        self.assertEqual(refused, {(m, "Q1_0") for m in ("rand-gqa", "rand-moe", "rand-70b")
                                   if not only or m in only.split(",")})

    def test_identity(self):
        """A float model to its own type converts nothing: the whole file is exact."""
        for model, name in (("tiny-F16", "F16"), ("tiny-BF16", "BF16"), ("tiny-F32", "F32"),
                            ("rand-moe", "F32")):
            with self.subTest(model=model):
                self.assertEqual(self.check(model, name), 0)
                with open(os.path.join(self.dir, "ref.gguf"), "rb") as a, \
                        open(os.path.join(self.dir, "ours.gguf"), "rb") as b:
                    self.assertEqual(a.read(), b.read())

    def test_quantized_source(self):
        """The bundled Q4_K_M model: llama.cpp refuses a NAME exactly when ggufs does
        (requantizing is off), and with allow_requantize makes every one."""
        made = []
        for name, _ in NAMES:
            with self.subTest(name=name):
                if self.check(TINY, name) is not None:
                    made.append(name)
        # what a Q4_K_M model copies whole: its own mixture
        self.assertIn("Q4_K_M", made)
        self.assertNotIn("Q8_0", made)
        for name in ("F16", "Q8_0", "Q4_K_M", "Q2_K", "IQ4_XS", "MXFP4_MOE"):
            with self.subTest(name=name, requantize=True):
                self.assertIsNotNone(self.check(TINY, name, requantize=True))


def mount_test_main():
    """The main of the quant tests that mount (their argument: the ggufs binary, with
    tests/mount on sys.path): skipped (77) without /dev/fuse or without libllama
    (failed instead when GGUFS_REQUIRE_LLAMA is set), then their unittest cases."""
    import ggufs_mount as gm
    gm.setup()
    if not find_libllama():
        gm.main("llama", "libllama of node-llama-cpp is not installed (npm ci in tests/llama)")
    unittest.main(verbosity=2)


def main():
    global DUMP
    DUMP = sys.argv.pop(1)
    lib = find_libllama()
    if not lib or not os.path.isfile(lib):
        if os.environ.get("GGUFS_REQUIRE_LLAMA"):
            print("libllama of node-llama-cpp is not installed", file=sys.stderr)
            sys.exit(1)
        print("skipped: libllama of node-llama-cpp is not installed (npm ci in tests/llama)")
        sys.exit(77)
    unittest.main()


if __name__ == "__main__":
    main()
