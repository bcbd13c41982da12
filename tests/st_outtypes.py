#!/usr/bin/env python3
"""model.gguf of tests/data/st/llama-spm-f32 as ggufs serves it (tests/st_convert), for
each outtype the reference set converted it to, against the sha256 of the converter's
output in expected-SHA256SUMS (auto and f16: F16 matrices; f32; bf16; q8_0).

Usage: st_outtypes.py ST_CONVERT DATA_DIR"""
import hashlib
import subprocess
import sys


def main():
    tool, data = sys.argv[1], sys.argv[2]
    want = {}
    with open(f"{data}/expected-SHA256SUMS") as f:
        for line in f:
            digest, name = line.split()
            want[name] = digest
    failed = 0
    for outtype in ("auto", "f16", "f32", "bf16", "q8_0"):
        name = f"llama-spm-f32.{outtype}.gguf"
        out = subprocess.run([tool, f"{data}/llama-spm-f32", outtype], capture_output=True,
                             timeout=60)
        got = hashlib.sha256(out.stdout).hexdigest()
        ok = out.returncode == 0 and got == want[name]
        print(f"{name}: {'OK' if ok else 'MISMATCH'} ({len(out.stdout)} bytes, {got[:16]}"
              f"... want {want[name][:16]}...) {out.stderr.decode().strip()}")
        failed += not ok
    sys.exit(1 if failed else 0)


main()
