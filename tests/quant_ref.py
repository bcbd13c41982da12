#!/usr/bin/env python3
"""lib/2-quant against llama.cpp itself (issue 36): for every type the quantizers make
(`quant_row --list`), the bytes of `quant_row TYPE` equal those of ggml_quantize_chunk
(libggml-base.so of the pinned node-llama-cpp, through ctypes, imatrix NULL: what
llama_model_quantize() calls without an importance matrix) on the same values, byte for
byte: gaussian, uniform, heavy-tailed and outlier rows at many scales, rows of crafted
edge blocks (zeros, one huge value, negatives only, constants, denormals, ties, fp16
overflow), NaN and infinities, each for several seeds.

A block that llama.cpp's own check refuses (ggml_validate_row_data: an inf or NaN scale,
or value of a float type) is one that llama_model_quantize() never writes: it stops
with "quantized data validation failed". Such blocks are counted but not compared: for
them ggml's bytes depend on which of two NaNs its compiler happened to keep (the
operand order of an addition, which differs between the unrolled copies of one loop).

    python3 tests/quant_ref.py BUILD/tests/quant_row [TYPE ...]

Without the package (tests/llama/node_modules, `npm ci` there) the test is skipped (77),
except where GGUFS_REQUIRE_LLAMA is set (CI sets it): there it fails."""
import ctypes
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BINS = os.path.join(HERE, "llama", "node_modules", "@node-llama-cpp", "linux-x64", "bins",
                    "linux-x64")
SEEDS = (1, 2, 3)
QK_K = 256


LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_quiet = LOG_CALLBACK(lambda level, text, data: None)


class Ggml:
    """The pinned libggml-base.so: its quantizer and its check of quantized rows."""

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        self.chunk = lib.ggml_quantize_chunk
        self.chunk.restype = ctypes.c_size_t
        self.chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                               ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        self._validate = lib.ggml_validate_row_data
        self._validate.restype = ctypes.c_bool
        self._validate.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        lib.ggml_log_set.argtypes = [LOG_CALLBACK, ctypes.c_void_p]
        lib.ggml_log_set(_quiet, None)

    def validate(self, type_id, data):
        """Whether llama.cpp's check accepts the quantized bytes data. The check prints
        each refusal on stderr itself (fd 2, not through the log): the test counts them
        instead, so fd 2 goes to /dev/null meanwhile."""
        sys.stderr.flush()
        saved = os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 2)
            return self._validate(type_id, data, len(data))
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(null)


def load_ggml():
    """The pinned libggml-base.so (a Ggml), or None when it is absent."""
    path = os.path.join(BINS, "libggml-base.so")
    return Ggml(path) if os.path.exists(path) else None


def ggml_bytes(ggml, type_id, block_bytes, block_elems, x, n_per_row):
    """llama.cpp's bytes for the float32 rows x (n_per_row values each)."""
    nrows = x.size // n_per_row
    out = np.zeros(x.size // block_elems * block_bytes, dtype=np.uint8)
    got = ggml.chunk(type_id, x.ctypes.data, out.ctypes.data, 0, nrows, n_per_row, None)
    assert got == out.size, (got, out.size)
    return out.tobytes()


def ours(tool, name, x):
    """lib/2-quant's bytes for the float32 values x."""
    r = subprocess.run([tool, name], input=x.tobytes(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300, check=False)
    if r.returncode != 0:
        raise AssertionError("quant_row %s failed: %s" % (name, r.stderr.decode()))
    return r.stdout


# The data sets: each makes rows of n_per_row float32 values from a seeded generator.
def gaussian(rng, nrows, n_per_row):
    """Normal values, each row at its own scale from 1e-6 to 1e4 (weights are ~0.02)."""
    scale = 10.0 ** rng.uniform(-6, 4, size=(nrows, 1))
    return rng.standard_normal((nrows, n_per_row)) * scale


def uniform(rng, nrows, n_per_row):
    """Uniform values over a range that straddles zero, lies above it or below it."""
    lo = rng.uniform(-2, 1, size=(nrows, 1))
    width = rng.uniform(1e-3, 3, size=(nrows, 1))
    return lo + width * rng.random((nrows, n_per_row))


def heavy(rng, nrows, n_per_row):
    """Student's t with 1 to 3 degrees of freedom: rare values far out."""
    df = rng.choice([1.0, 2.0, 3.0], size=(nrows, 1))
    return rng.standard_t(df, size=(nrows, n_per_row)) * 0.05


def outliers(rng, nrows, n_per_row):
    """Gaussian weights with one value in ~200 a hundred times larger, of either sign."""
    x = rng.standard_normal((nrows, n_per_row)) * 0.02
    hit = rng.random((nrows, n_per_row)) < 0.005
    x[hit] *= 100.0
    return x


def quantized_grid(rng, nrows, n_per_row):
    """Values already on a coarse grid (small integers times a power of two, halves
    included), which land exactly on the quantizers' rounding ties."""
    q = rng.integers(-40, 41, size=(nrows, n_per_row)).astype(np.float64) / 2.0
    return q * 2.0 ** rng.integers(-12, 4, size=(nrows, 1))


def edge_blocks(rng, nrows, n_per_row):
    """Crafted 256-value blocks, one pattern a block, cycling through every pattern."""
    patterns = []
    g = lambda: rng.standard_normal(QK_K)  # noqa: E731
    patterns.append(np.zeros(QK_K))
    patterns.append(-np.abs(g()))                       # negatives only
    patterns.append(np.abs(g()) + 1.0)                  # positives only, away from 0
    patterns.append(np.full(QK_K, 0.37))                # constant
    patterns.append(np.full(QK_K, -5.0))
    one = np.zeros(QK_K)
    one[rng.integers(QK_K)] = 1e6                       # one huge value in zeros
    patterns.append(one)
    big = g() * 1e-3
    big[rng.integers(QK_K)] = -3e4                      # one huge value in small ones
    patterns.append(big)
    patterns.append(g() * 1e-40)                        # float denormals
    patterns.append(g() * 1e-7)                         # below fp16's smallest normal
    patterns.append(g() * 1e-20)
    patterns.append(g() * 1e5)                          # scales beyond fp16's range
    patterns.append(g() * 3e38)                         # near float's limit
    t = np.arange(QK_K) % 17 - 8.0                      # exact integers: ties in /d
    patterns.append(t)
    patterns.append(t + 0.5)
    alt = np.where(np.arange(QK_K) % 2 == 0, 1.0, -1.0)
    patterns.append(alt)                                # +-1 only
    sparse = np.zeros(QK_K)
    sparse[::16] = g()[::16]                            # one value per 16
    patterns.append(sparse)
    first = np.zeros(QK_K)
    first[::32] = 2.0
    first[1::32] = -2.0                                 # equal magnitudes, both signs
    patterns.append(first)
    for m in (127.0, -8.0, -16.0, 15.0, 31.0, 63.0, -32.0, -4.0, 3.0):
        half = (np.arange(QK_K) % (2 * abs(m))) - abs(m) + 0.5   # halves: exact ties
        half[::32] = m                                  # once /d is 1, when max is m
        patterns.append(half)
    rows = []
    i = 0
    while len(rows) < nrows * n_per_row // QK_K:
        rows.append(patterns[i % len(patterns)])
        i += 1
    return np.concatenate(rows).reshape(nrows, n_per_row)


def nonfinite(rng, nrows, n_per_row):
    """Gaussian rows with NaN, inf and -inf here and there, some blocks all NaN, and
    NaNs of every kind: quiet and signalling, either sign, with payloads (set as float32
    bits, which a conversion from float64 would quiet)."""
    x = rng.standard_normal((nrows, n_per_row)).astype(np.float32)
    flat = x.reshape(-1)
    for v in (np.nan, np.inf, -np.inf):
        idx = rng.integers(flat.size, size=flat.size // 300 + 1)
        flat[idx] = v
    flat[:QK_K] = np.nan
    flat[QK_K:2 * QK_K] = np.inf
    bits = flat.view(np.uint32)
    nans = np.array([0x7f800001, 0xff800001, 0x7fa00000, 0xffbfffff, 0x7fc00001,
                     0xffc12345, 0x7fffffff], dtype=np.uint32)
    bits[2 * QK_K:2 * QK_K + nans.size] = nans
    idx = rng.integers(flat.size, size=flat.size // 300 + 1)
    bits[idx] = nans[rng.integers(nans.size, size=idx.size)]
    return x


DATASETS = [
    # name, function, rows, values a row
    ("gaussian", gaussian, 96, 4096),
    ("uniform", uniform, 96, 2048),
    ("heavy", heavy, 64, 4096),
    ("outliers", outliers, 64, 4096),
    ("grid", quantized_grid, 64, 1024),
    ("edge", edge_blocks, 68, QK_K),
    ("nonfinite", nonfinite, 16, 2048),
]


def differing_blocks(got, want, block_bytes):
    """The indexes of the blocks where got and want (of equal length) differ."""
    a = np.frombuffer(got, dtype=np.uint8).reshape(-1, block_bytes)
    b = np.frombuffer(want, dtype=np.uint8).reshape(-1, block_bytes)
    return np.nonzero((a != b).any(axis=1))[0]


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    tool = sys.argv[1]
    only = set(sys.argv[2:])
    ggml = load_ggml()
    if ggml is None:
        why = "llama.cpp's libggml-base.so is not installed (npm ci in tests/llama)"
        if os.environ.get("GGUFS_REQUIRE_LLAMA"):
            print("FAIL: GGUFS_REQUIRE_LLAMA is set but " + why)
            return 1
        print("SKIP: " + why)
        return 77
    listed = subprocess.run([tool, "--list"], stdout=subprocess.PIPE, check=True)
    types = [line.split() for line in listed.stdout.decode().splitlines()]
    failures = 0
    for name, type_id, block_elems, block_bytes in types:
        if only and name not in only:
            continue
        type_id, block_elems, block_bytes = int(type_id), int(block_elems), int(block_bytes)
        values = blocks = refused = 0
        failed_before = failures
        for seed in SEEDS:
            for k, (dname, make, nrows, n_per_row) in enumerate(DATASETS):
                rng = np.random.default_rng([seed, type_id, k])
                with np.errstate(all="ignore"):
                    x = np.ascontiguousarray(make(rng, nrows, n_per_row), dtype=np.float32)
                x = x.reshape(-1)
                want = ggml_bytes(ggml, type_id, block_bytes, block_elems, x, n_per_row)
                got = ours(tool, name, x)
                values += x.size
                blocks += x.size // block_elems
                if len(got) != len(want):
                    failures += 1
                    print("FAIL %s %s seed %d: %d bytes, not %d" %
                          (name, dname, seed, len(got), len(want)))
                    continue
                wrong = []
                for b in differing_blocks(got, want, block_bytes):
                    block = want[b * block_bytes:(b + 1) * block_bytes]
                    if ggml.validate(type_id, block):
                        wrong.append(b)
                    else:
                        refused += 1
                if wrong:
                    failures += 1
                    b = wrong[0]
                    print("FAIL %s %s seed %d: %d of %d blocks differ, first %d" %
                          (name, dname, seed, len(wrong), len(want) // block_bytes, b))
                    print("  values", x[b * block_elems:(b + 1) * block_elems][:16])
                    print("  ggml  ", want[b * block_bytes:(b + 1) * block_bytes].hex())
                    print("  ggufs ", got[b * block_bytes:(b + 1) * block_bytes].hex())
        print("%-8s %8d values, %7d blocks, %d seeds x %d data sets: %s%s" %
              (name, values, blocks, len(SEEDS), len(DATASETS),
               "FAIL" if failures > failed_before else "identical",
               ", but %d that llama.cpp refuses" % refused if refused else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
