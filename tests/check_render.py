#!/usr/bin/env python3
"""Checks the renderers on the test model against tinyllama-q4km.expected.json, which was
written independently of ggufs: gguf.json parses as JSON and carries the same metadata
and tensors; each metadata/KEY file reads back as the stored value; npy headers parse.

usage: check_render.py RENDER_DUMP MODEL EXPECTED_JSON"""
import ast
import decimal
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

dump, model, expected_path = sys.argv[1:4]
expected = json.load(open(expected_path))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(*args):
    return subprocess.run([dump, model, *args], check=True, capture_output=True).stdout


def f32(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


def same_scalar(typ, got, want):
    if typ == 'float32':
        # the text, read as float32 (strtof rounds once, like this), is the stored value
        return f32(float(got)) == want
    if typ == 'float64':
        return float(got) == want
    if typ == 'bool':
        return got is want or got == ('true' if want else 'false')
    return int(got) == want


# gguf.json
doc = json.loads(run('json').decode('utf-8'))
check(doc['file'] == 'tinyllama-q4km.gguf', 'file name')
check(doc['version'] == 3, 'version')
check(list(doc['metadata']) == list(expected['metadata']), 'metadata keys in file order')
for key, want in expected['metadata'].items():
    got = doc['metadata'].get(key)
    if got is None:
        continue
    check(got['type'] == want['type'], f'{key}: type {got["type"]} != {want["type"]}')
    # the metadata file's type xattr says the same
    check(run('type', key).decode() == want['type'], f'{key}: type xattr')
    lines = run('meta', key).decode('utf-8').split('\n')
    check(lines[-1] == '', f'{key}: metadata file ends in a newline')
    if want['type'].startswith('array['):
        elem = want['type'][6:-1]
        vals = got['value']
        check(len(vals) == want['count'], f'{key}: json count')
        check(len(lines) - 1 == want['count'], f'{key}: metadata lines')
        for i, w in enumerate(want['first']):
            if elem == 'string':
                check(vals[i] == w, f'{key}[{i}] json')
                check(lines[i] == w, f'{key}[{i}] line')  # no escapes in these tokens
            else:
                check(same_scalar(elem, vals[i], w), f'{key}[{i}] json {vals[i]} != {w}')
                check(same_scalar(elem, lines[i], w), f'{key}[{i}] line {lines[i]} != {w}')
        if elem == 'string':
            check(vals[-1] == want['last'] and lines[-2] == want['last'], f'{key} last')
        else:
            check(same_scalar(elem, vals[-1], want['last']), f'{key} last json')
            check(same_scalar(elem, lines[-2], want['last']), f'{key} last line')
    elif want['type'] == 'string':
        check(got['value'] == want['value'], f'{key}: json string')
        check('\n'.join(lines[:-1]) == want['value'], f'{key}: metadata string bytes')
    else:
        check(same_scalar(want['type'], got['value'], want['value']), f'{key}: json value')
        check(len(lines) == 2 and same_scalar(want['type'], lines[0], want['value']),
              f'{key}: metadata line {lines[0]!r}')

check(len(doc['tensors']) == len(expected['tensors']), 'tensor count')
for got, want in zip(doc['tensors'], expected['tensors']):
    name = want['name']
    check(got['name'] == name, f'tensor order: {got["name"]} != {name}')
    check(got['type'].lower() == want['type'].lower(), f'{name}: type')
    check(got['dims'] == want['dims'], f'{name}: dims')
    check(got['offset'] == want['file_offset'], f'{name}: offset')
    check(got['size'] == want['nbytes'], f'{name}: size')
    check('shard' not in got, f'{name}: no shard in a single file')
    # the npy header as numpy reads it
    h = run('npy', name)
    check(h[:8] == b'\x93NUMPY\x01\x00', f'{name}: npy magic')
    hlen = struct.unpack('<H', h[8:10])[0]
    check(len(h) == 10 + hlen and len(h) % 64 == 0, f'{name}: npy length')
    d = ast.literal_eval(h[10:].decode('latin1'))
    check(d == {'descr': '<f4', 'fortran_order': False,
                'shape': tuple(want['numpy_shape'])}, f'{name}: npy dict {d}')
    check(run('name', name).decode() == name, f'{name}: file name unchanged')

summary = run('summary').decode('utf-8')
check('Q4_K - Medium' in summary, 'summary file type')


def strict_json(text):
    """json.loads that refuses what JSON does not allow (NaN, raw control bytes)."""
    def no_constants(c):
        raise ValueError('not JSON: ' + c)
    return json.loads(text, parse_constant=no_constants)


doc_text = run('json')
strict_json(doc_text.decode('utf-8'))
if shutil.which('jq'):
    check(subprocess.run(['jq', '-e', '.'], input=doc_text,
                         capture_output=True).returncode == 0, 'jq accepts gguf.json')

# A hand-written GGUF with awkward values; the metadata files are checked against this
# script's own reading of ggufs(1)'s table, and gguf.json against Python's JSON.
SCALAR = {0: ('<B', 'uint8'), 1: ('<b', 'int8'), 2: ('<H', 'uint16'), 3: ('<h', 'int16'),
          4: ('<I', 'uint32'), 5: ('<i', 'int32'), 6: ('<f', 'float32'), 7: ('<?', 'bool'),
          10: ('<Q', 'uint64'), 11: ('<q', 'int64'), 12: ('<d', 'float64')}


def enc_str(b):
    return struct.pack('<Q', len(b)) + b


def enc_val(t, v):
    if t == 8:
        return enc_str(v)
    if t == 9:
        et, items = v
        return struct.pack('<IQ', et, len(items)) + b''.join(enc_val(et, x) for x in items)
    return struct.pack(SCALAR[t][0], v)


def spec_float(x, bits):
    """The shortest %.Ng text that reads back (N up to 9 or 17); below 1e16 written
    out without an exponent, as Python's repr does."""
    if bits == 32:
        x = f32(x)   # what the file holds
    if math.isnan(x):
        return 'nan'
    if math.isinf(x):
        return 'inf' if x > 0 else '-inf'
    for n in range(1, 10 if bits == 32 else 18):
        t = '%.*g' % (n, x)
        back = f32(float(t)) if bits == 32 else float(t)
        if struct.pack('<d', back) != struct.pack('<d', x):
            continue
        if 'e+' in t and int(t.split('e+')[1]) < 16:
            t = format(decimal.Decimal(t), 'f')
        return t


def spec_escape(b):
    out = b''
    for c in b:
        ch = bytes([c])
        if ch == b'\\':
            out += b'\\\\'
        elif ch == b'\n':
            out += b'\\n'
        elif ch == b'\r':
            out += b'\\r'
        elif ch == b'\t':
            out += b'\\t'
        elif c < 0x20 or c == 0x7f:
            out += b'\\x%02x' % c
        else:
            out += ch
    return out


def spec_scalar(t, v):
    if t in (6, 12):
        return spec_float(v, 32 if t == 6 else 64).encode()
    if t == 7:
        return b'true' if v else b'false'
    return str(v).encode()


def json_elem(t, v):
    if t == 8:
        return v.decode('utf-8', 'replace')
    if t == 9:
        return [json_elem(v[0], x) for x in v[1]]
    if t in (6, 12) and not math.isfinite(v):
        return spec_float(v, 32)
    if t in (6, 12):
        return float(spec_float(v, 32 if t == 6 else 64))
    return bool(v) if t == 7 else v


def spec_type(t, v):
    if t != 9:
        return SCALAR[t][1] if t in SCALAR else 'string'
    et, items = v
    if et != 9:
        return 'array[%s]' % spec_type(et, None)
    return 'array[%s]' % (spec_type(9, items[0]) if items else 'array')


def spec_file(t, v):
    if t == 8:
        return v + b'\n'
    if t != 9:
        return spec_scalar(t, v) + b'\n'
    et, items = v
    out = b''
    for x in items:
        if et == 8:
            out += spec_escape(x) + b'\n'
        elif et == 9:
            out += json.dumps(json_elem(9, x), ensure_ascii=False).encode() + b'\n'
        else:
            out += spec_scalar(et, x) + b'\n'
    return out


def norm(x):
    """JSON values compared by value: 10000 and 10000.0 alike; big integers exact."""
    if isinstance(x, list):
        return [norm(e) for e in x]
    if isinstance(x, float) or (isinstance(x, int) and not isinstance(x, bool)
                                and abs(x) < 2**53):
        return float(x)
    return x


kvs = [
    (b'general.architecture', 8, b'llama'),
    (b'u64max', 10, 2**64 - 1), (b'i64min', 11, -2**63), (b'i8', 1, -128),
    (b'u16', 2, 65535), (b'i16', 3, -32768), (b'u8', 0, 255), (b'b', 7, True),
    (b'f32.eps', 6, 1e-5), (b'f32.base', 6, 10000.0), (b'f32.big', 6, 500000.0),
    (b'f32.tenth', 6, 0.1), (b'f32.nan', 6, float('nan')), (b'f32.ninf', 6, float('-inf')),
    (b'f32.negzero', 6, -0.0), (b'f32.denorm', 6, f32(1e-45)),
    (b'f64.third', 12, 1 / 3), (b'f64.sum', 12, 0.1 + 0.2), (b'f64.tiny', 12, 5e-324),
    (b'str.raw', 8, b'multi\nline \xff\x00 \xe2\x82\xac\\'),
    (b'str.empty', 8, b''),
    (b'arr.str', 9, (8, [b'a\\b', b'new\nline', b'\r\t', b'\x01\x7f', b'\xc3\xa9\xff', b''])),
    (b'arr.f32', 9, (6, [0.5, float('inf'), -7740.0, f32(0.1)])),
    (b'arr.i32', 9, (5, [-1, 2**31 - 1])),
    (b'arr.bool', 9, (7, [False, True])),
    (b'arr.empty', 9, (4, [])),
    (b'arr.nested', 9, (9, [(0, [1, 2]), (0, []), (0, [255])])),
    (b'arr.nested.str', 9, (9, [(8, [b'q"uote', b'\xf0\x9f\x98\x80', b'\xed\xa0\x80'])])),
    (b'arr.nested.f', 9, (9, [(12, [float('nan'), 1e300])])),
    (b'arr.deep', 9, (9, [(9, [(3, [-5]), (3, [])])])),
    (b'arr.nested.empty', 9, (9, [])),
    (b'key with\nnewline \xff', 4, 7),
]
tensors = [(b'weird/name.f32', [4]), (b'\xff\x01tab\t', [2, 2])]
hdr = b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kvs))
for k, t, v in kvs:
    hdr += enc_str(k) + struct.pack('<I', t) + enc_val(t, v)
off = 0
for name, dims in tensors:
    hdr += enc_str(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims)
    hdr += struct.pack('<IQ', 0, off)
    off += 32 * ((4 * math.prod(dims) + 31) // 32)
hdr += b'\0' * (-len(hdr) % 32)
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, 'awkward.gguf')
    with open(path, 'wb') as f:
        f.write(hdr + b'\0' * off)
    model = path
    doc_text = run('json')
    doc = strict_json(doc_text.decode('utf-8'))
    if shutil.which('jq'):
        check(subprocess.run(['jq', '-e', '.'], input=doc_text,
                             capture_output=True).returncode == 0, 'jq: awkward gguf.json')
    keys = list(doc['metadata'])
    check(keys == [k.decode('utf-8', 'replace') for k, _, _ in kvs], 'awkward keys')
    for (k, t, v), jk in zip(kvs, keys):
        got = doc['metadata'][jk]
        check(got['type'] == spec_type(t, v), f'{k}: json type {got["type"]}')
        want = json_elem(t, v) if t != 9 else [json_elem(v[0], x) for x in v[1]]
        check(norm(got['value']) == norm(want), f'{k}: json value {got["value"]!r}')
        if b'\n' in k or b'\xff' in k:
            continue   # not a command-line argument
        check(run('meta', k.decode()) == spec_file(t, v),
              f'{k}: metadata file {run("meta", k.decode())!r} != {spec_file(t, v)!r}')
        check(run('type', k.decode()).decode() == spec_type(t, v), f'{k}: type xattr')
    check(b'"f32.negzero": {"type": "float32", "value": -0, "file": "metadata/f32.negzero"}'
          in doc_text, 'json -0')
    check(doc['tensors'][0]['f32'] == 'tensors/weird%2Fname%2Ef32.f32', 'json f32 path')
    names = [t['name'] for t in doc['tensors']]
    check(names == [n.decode('utf-8', 'replace') for n, _ in tensors], 'awkward tensor names')
    check(run('name', 'weird/name.f32') == b'weird%2Fname%2Ef32', 'tensor file name')

for f in failures:
    print('FAIL:', f)
sys.exit(1 if failures else 0)
