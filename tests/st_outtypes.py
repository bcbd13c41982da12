#!/usr/bin/env python3
"""model.gguf of tests/data/st's folders as ggufs serves it (tests/st_convert), for each
outtype the reference set converted them to, against the sha256 of the converter's
output in expected-SHA256SUMS: llama-spm-f32 (f32 source; auto is f16) and mistral-spm
(bf16 source, MistralForCausalLM; auto is bf16, head_dim null), llama-spm-sharded (4
parts and model.safetensors.index.json).

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
    for folder, outtype in [("llama-spm-f32", t) for t in ("auto", "f16", "f32", "bf16", "q8_0")] + \
            [("mistral-spm", t) for t in ("auto", "f16", "f32", "bf16", "q8_0")] + \
            [("llama-spm-sharded", t) for t in ("auto", "f16", "f32", "bf16", "q8_0")]:
        name = f"{folder}.{outtype}.gguf"
        out = subprocess.run([tool, f"{data}/{folder}", outtype], capture_output=True,
                             timeout=60)
        got = hashlib.sha256(out.stdout).hexdigest()
        ok = out.returncode == 0 and got == want[name]
        print(f"{name}: {'OK' if ok else 'MISMATCH'} ({len(out.stdout)} bytes, {got[:16]}"
              f"... want {want[name][:16]}...) {out.stderr.decode().strip()}")
        failed += not ok
    sys.exit(1 if failed else 0)


main()
