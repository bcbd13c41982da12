#!/usr/bin/env python3
"""lib/2-quant under an importance matrix against llama.cpp itself (issue 46): for every
type the weighted quantizers make (`quant_row --weighted-list`), the bytes of
quant_row_weighted equal those of ggml_quantize_chunk with the same imatrix
(libggml-base.so of the pinned node-llama-cpp, through ctypes: what llama_model_quantize()
calls given one), byte for byte; and so do the bytes of the same rows quantized a part at
a time (quant_row_prepare, then runs of blocks by quant_blocks_weighted in a shuffled
order) on 2 threads. The values are quant_ref.py's data sets (gaussian, uniform,
heavy-tailed, outliers, values on a grid, crafted edge blocks, NaN and infinities,
all-zero sub-blocks); the rows are 256, 512, 896 (not whole 256-blocks: the legacy
types, which take a sum over the whole row), 4096 and 11008 values long; the matrices
are all ones, uniform, heavy-tailed (log-normal over decades, as real ones are), with
zeros (single columns and whole sub-blocks), tiny (1e-30, denormals) and huge (1e15).
Types that do not need a matrix are also run without one (weights "none"), for the
types only llama.cpp makes with one (iq2_s, iq3_xxs, iq1_m: their ggml quantizer takes
NULL too).

As in quant_ref.py, a block that llama.cpp's own check refuses (ggml_validate_row_data)
is counted, not compared. Where llama.cpp's quantizer stops the process instead of
writing (an assertion: a group whose every weighted distance to the grid is NaN or
overflows), it runs in a forked child; the rows it stops on are counted, not compared
(ours must still quantize them, and the same in parts as whole).

NaN: under a matrix one NaN reaches every weight of its super-block (of its row, for
the legacy types), so NaNs meet NaNs, and where two meet in an operation x86 keeps the
first operand's, which is the compiler's choice, not the same in every unrolled copy of
a loop; a quant rounded from a NaN shows its payload. So where the input holds NaNs,
the rows also run with every NaN made the one quiet NaN 0x7fc00000 (one payload: no
choice left), and those bytes are compared in full; of the rows as they are, a block
whose llama.cpp bytes change with the NaNs' payloads is counted, not compared (its
scales are 0 or NaN: a block that decodes to zeros or is refused).

    python3 tests/quant_ref_imatrix.py BUILD/tests/quant_row [TYPE ...]

Without the package (tests/llama/node_modules, `npm ci` there) the test is skipped (77),
except where GGUFS_REQUIRE_LLAMA is set (CI sets it): there it fails."""
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quant_ref  # noqa: E402  (the data sets, the library, the block comparison)

SEEDS = (1, 2, 3)
ROW_LENGTHS = (256, 512, 896, 4096, 11008)
VALUES_PER_CASE = 32768         # about this many values a (data set, matrix) case
SLOW = {"iq1_m": 4, "iq2_xs": 2, "iq2_xxs": 2, "iq2_s": 2, "iq3_xxs": 2, "iq3_s": 2}
# The types whose ggml quantizer ignores the matrix: each data set once suffices.
IGNORING = {"f32", "f16", "bf16", "q8_0", "mxfp4", "tq1_0", "tq2_0", "q1_0", "q2_0"}


def matrix_ones(rng, n):
    return np.ones(n)


def matrix_uniform(rng, n):
    return rng.uniform(0.1, 10.0, n)


def matrix_heavy(rng, n):
    return rng.lognormal(0.0, 3.0, n)


def matrix_zeros(rng, n):
    w = rng.lognormal(0.0, 2.0, n)
    w[rng.random(n) < 0.25] = 0.0
    runs = w[: n // 32 * 32].reshape(-1, 32)
    runs[rng.random(runs.shape[0]) < 0.2] = 0.0
    halves = w[: n // 16 * 16].reshape(-1, 16)
    halves[rng.random(halves.shape[0]) < 0.1] = 0.0
    return w


def matrix_tiny(rng, n):
    return rng.lognormal(0.0, 2.0, n) * 1e-30


def matrix_huge(rng, n):
    return rng.lognormal(0.0, 2.0, n) * 1e15


MATRICES = [("ones", matrix_ones), ("uniform", matrix_uniform), ("heavy", matrix_heavy),
            ("zeros", matrix_zeros), ("tiny", matrix_tiny), ("huge", matrix_huge)]


class Reference:
    """llama.cpp's quantizer, run in a forked child so that its assertions end the
    child, not the test."""

    def __init__(self, ggml, path):
        # an assertion would start gdb for a backtrace: a second lost each time
        os.environ["GGML_NO_BACKTRACE"] = "1"
        self.ggml = ggml
        lib = ctypes.CDLL(path)
        self.init = lib.ggml_quantize_init
        self.init.argtypes = [ctypes.c_int]

    def _child(self, type_id, x, nrows, n_per_row, w, size):
        """The bytes of one ggml_quantize_chunk call, or None where it stops."""
        r, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)
                os.dup2(null, 2)
                out = np.zeros(size, dtype=np.uint8)
                got = self.ggml.chunk(type_id, x.ctypes.data, out.ctypes.data, 0, nrows,
                                      n_per_row, None if w is None else w.ctypes.data)
                data = out.tobytes() if got == size else b""
                view = memoryview(data)
                while view:
                    view = view[os.write(wr, view):]
            finally:
                os._exit(0)
        os.close(wr)
        chunks = []
        while True:
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        data = b"".join(chunks)
        return data if status == 0 and len(data) == size else None

    def quantize(self, type_id, block_elems, block_bytes, x, n_per_row, w):
        """llama.cpp's bytes for the rows x, and the indexes of the rows it stops on
        (their bytes are left zero)."""
        nrows = x.size // n_per_row
        row_size = n_per_row // block_elems * block_bytes
        whole = self._child(type_id, x, nrows, n_per_row, w, nrows * row_size)
        if whole is not None:
            return whole, []
        rows, stopped = [], []
        for i in range(nrows):
            one = np.ascontiguousarray(x[i * n_per_row:(i + 1) * n_per_row])
            got = self._child(type_id, one, 1, n_per_row, w, row_size)
            if got is None:
                stopped.append(i)
                got = bytes(row_size)
            rows.append(got)
        return b"".join(rows), stopped


def ours(tool, name, x, n_per_row, w, parts=None, threads=1):
    """lib/2-quant's bytes for the rows x under w (None: no matrix)."""
    with tempfile.NamedTemporaryFile(prefix="ggufs-imatrix-", suffix=".f32") as wf:
        if w is not None:
            wf.write(w.tobytes())
            wf.flush()
        cmd = [tool, "--weights", wf.name if w is not None else "none", "--row",
               str(n_per_row), "--threads", str(threads)]
        if parts is not None:
            cmd += ["--parts", str(parts)]
        r = subprocess.run(cmd + [name], input=x.tobytes(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=600, check=False)
    if r.returncode != 0:
        raise AssertionError("quant_row %s failed: %s" % (name, r.stderr.decode()))
    return r.stdout


def cases(name, block_elems, requires, ignores):
    """(seed, data set index, data set, matrix name, matrix maker or None, n_per_row,
    nrows) for one type: every data set under every matrix (and without one) once,
    the seeds taking turns; for a type that ignores the matrix, every data set once."""
    budget = VALUES_PER_CASE // SLOW.get(name, 1)
    lengths = [n for n in ROW_LENGTHS if n % block_elems == 0]
    matrices = list(MATRICES) + ([] if requires else [("none", None)])
    turn = 0
    for k, dataset in enumerate(quant_ref.DATASETS):
        for m, (mname, make) in enumerate(matrices):
            if ignores and m != k % len(matrices):
                continue
            seed = SEEDS[turn % len(SEEDS)]
            turn += 1
            n_per_row = lengths[(k + m + seed) % len(lengths)]
            nrows = max(2, budget // n_per_row)
            nrows += nrows % 2      # edge_blocks wants whole 256-value blocks
            yield seed, k, dataset, mname, make, n_per_row, nrows


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    tool = sys.argv[1]
    only = set(sys.argv[2:])
    ggml = quant_ref.load_ggml()
    if ggml is None:
        why = "llama.cpp's libggml-base.so is not installed (npm ci in tests/llama)"
        if os.environ.get("GGUFS_REQUIRE_LLAMA"):
            print("FAIL: GGUFS_REQUIRE_LLAMA is set but " + why)
            return 1
        print("SKIP: " + why)
        return 77
    ref = Reference(ggml, os.path.join(quant_ref.BINS, "libggml-base.so"))
    listed = subprocess.run([tool, "--weighted-list"], stdout=subprocess.PIPE, check=True)
    types = [line.split() for line in listed.stdout.decode().splitlines()]
    failures = 0
    for name, type_id, block_elems, block_bytes, requires in types:
        if only and name not in only:
            continue
        type_id, block_elems, block_bytes = int(type_id), int(block_elems), int(block_bytes)
        requires = requires == "1"
        ref.init(type_id)           # once here: a child's grids would die with it
        values = blocks = refused = stopped = payloads = 0
        failed_before = failures
        for seed, k, (dname, make, _, _), mname, mmake, n_per_row, nrows in \
                cases(name, block_elems, requires, name in IGNORING):
            rng = np.random.default_rng([seed, type_id, k, n_per_row])
            with np.errstate(all="ignore"):
                x = np.ascontiguousarray(make(rng, nrows, n_per_row), dtype=np.float32)
            x = x.reshape(-1)
            w = None if mmake is None else \
                np.ascontiguousarray(mmake(rng, n_per_row), dtype=np.float32)
            base = "%s %s matrix, rows of %d, seed %d" % (dname, mname, n_per_row, seed)
            runs = [(x, None, base)]
            if np.isnan(x).any():
                canon = np.where(np.isnan(x), np.float32(np.nan), x).astype(np.float32)
                canon.view(np.uint32)[np.isnan(canon)] = 0x7fc00000
                runs.insert(0, (canon, None, base + ", one NaN"))
            for xs, _, what in runs:
                want, stops = ref.quantize(type_id, block_elems, block_bytes, xs, n_per_row, w)
                got = ours(tool, name, xs, n_per_row, w)
                parts = ours(tool, name, xs, n_per_row, w, parts=seed, threads=2)
                values += xs.size
                blocks += xs.size // block_elems
                stopped += len(stops)
                if xs is not x:
                    canon_want = want
                if got != parts:
                    failures += 1
                    b = quant_ref.differing_blocks(got, parts, block_bytes)[0]
                    print("FAIL %s %s: in parts, block %d differs from the whole row's" %
                          (name, what, b))
                    continue
                if len(got) != len(want):
                    failures += 1
                    print("FAIL %s %s: %d bytes, not %d" % (name, what, len(got), len(want)))
                    continue
                row_blocks = n_per_row // block_elems
                wrong = []
                for b in quant_ref.differing_blocks(got, want, block_bytes):
                    block = want[b * block_bytes:(b + 1) * block_bytes]
                    if b // row_blocks in stops:
                        continue
                    if not ggml.validate(type_id, block):
                        refused += 1
                    elif len(runs) > 1 and xs is x and \
                            block != canon_want[b * block_bytes:(b + 1) * block_bytes]:
                        payloads += 1
                    else:
                        wrong.append(b)
                if wrong:
                    failures += 1
                    b = wrong[0]
                    print("FAIL %s %s: %d of %d blocks differ, first %d" %
                          (name, what, len(wrong), len(want) // block_bytes, b))
                    print("  values ", xs[b * block_elems:(b + 1) * block_elems][:8])
                    if w is not None:
                        col = b % row_blocks * block_elems
                        print("  weights", w[col:col + 8])
                    print("  ggml   ", want[b * block_bytes:(b + 1) * block_bytes].hex())
                    print("  ggufs  ", got[b * block_bytes:(b + 1) * block_bytes].hex())
        notes = []
        if refused:
            notes.append("%d blocks llama.cpp refuses" % refused)
        if stopped:
            notes.append("%d rows llama.cpp stops on" % stopped)
        if payloads:
            notes.append("%d blocks whose bytes are NaN payloads" % payloads)
        print("%-8s %8d values, %6d blocks, whole and in parts: %s%s" %
              (name, values, blocks, "FAIL" if failures > failed_before else "identical",
               ", but " + ", ".join(notes) if notes else ""))
        sys.stdout.flush()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
