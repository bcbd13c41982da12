#!/usr/bin/env python3
"""Writes lib/1-format/llama_archs.c, llama.cpp's architectures, from llama.cpp's source:
the names of src/llama-arch.cpp's LLM_ARCH_NAMES (less "(unknown)", LLM_ARCH_UNKNOWN's,
which llama.cpp refuses as unknown); for each, whether src/llama-model.cpp's
llama_model_mapping makes a model of it (one it names but makes none of, llama.cpp
refuses as unsupported); and the keys its model class's load_arch_hparams
(src/models/*.cpp, or the one it inherits, models.h) requires whatever the model says:
the reads of a required key (ml.get_key, get_key_or_arr, get_arr, get_arr_n without a
false "required") at the top level of the function, up to the first statement that
could leave it early (a return or throw, or a block holding one) or that this reading
does not follow (a required read inside an expression): the keys after such a
statement, and those read inside a condition or a loop, are not listed, so the list
never holds a key llama.cpp can do without. A get_key into a hparams field of a known
scalar type also gives the GGUF type it must have.

usage: gen_llama_archs.py LLAMA_CPP_DIR OUTPUT.c           (write OUTPUT.c)
       gen_llama_archs.py --check LLAMA_CPP_DIR OUTPUT.c   (exit 1 when it differs)

The table is kept in the repository, not made at build time: the source is the pinned
llama.cpp of tests/llama (node_modules/node-llama-cpp/llama/gitRelease.bundle), which a
build need not have; tests/quant/test_quant_refuse.py checks the table against it.
"""

import os
import re
import sys


def fail(msg):
    sys.exit("gen_llama_archs.py: " + msg)


def read(src, path):
    with open(os.path.join(src, path)) as f:
        return f.read()


def archs(src):
    """[(enum, name, model class or None)] in LLM_ARCH_NAMES's order."""
    text = read(src, "src/llama-arch.cpp")
    m = re.search(r"LLM_ARCH_NAMES = \{(.*?)\n\};", text, re.S)
    if not m:
        fail("no LLM_ARCH_NAMES in src/llama-arch.cpp")
    names = re.findall(r'\{\s*(LLM_ARCH_\w+)\s*,\s*"([^"\\]*)"\s*\}', m.group(1))
    if len(names) != m.group(1).count("{"):
        fail("an entry of LLM_ARCH_NAMES is not { LLM_ARCH_X, \"name\" }")
    text = read(src, "src/llama-model.cpp")
    m = re.search(r"\nstatic llama_model \* llama_model_mapping\(llm_arch arch.*?\n\}\n", text, re.S)
    if not m:
        fail("no llama_model_mapping in src/llama-model.cpp")
    cls = {}
    for cases, name in re.findall(r"((?:\s*case LLM_ARCH_\w+:)+)\s*return new (llama_model_\w+)\(",
                                  m.group(0)):
        for e in re.findall(r"LLM_ARCH_\w+", cases):
            cls[e] = name
    if set(re.findall(r"case (LLM_ARCH_\w+):", m.group(0))) != set(cls):
        fail("a case of llama_model_mapping does not return new llama_model_X(...)")
    out = [(e, name, cls.get(e)) for e, name in names if e != "LLM_ARCH_UNKNOWN"]
    if not out or len({n for _, n, _ in out}) != len(out):
        fail("no architectures, or a name twice")
    return out


# a hparams field's C type: the GGUF type get_key wants of it (GKV_Base)
GGUF_TYPE = {"uint32_t": 4, "int32_t": 5, "float": 6, "bool": 7}
ANY_TYPE = 255


class Source:
    """What the requirements are read from: key names, hparams fields, model classes."""

    def __init__(self, src):
        text = read(src, "src/llama-arch.cpp")
        m = re.search(r"LLM_KV_NAMES = \{(.*?)\n\};", text, re.S)
        if not m:
            fail("no LLM_KV_NAMES in src/llama-arch.cpp")
        self.kv = dict(re.findall(r'\{\s*(LLM_KV_\w+)\s*,\s*"([^"\\]*)"\s*\}', m.group(1)))
        text = read(src, "src/llama-hparams.h")
        self.field = dict((n, t) for t, n in re.findall(
            r"^\s*(uint32_t|int32_t|float|bool)\s+(\w+)\s*[=;]", text, re.M))
        text = read(src, "src/models/models.h")
        self.parent = dict(re.findall(r"struct (llama_model_\w+)\s*:\s*public (llama_model_\w+)",
                                      text))
        self.body = {}
        folder = os.path.join(src, "src", "models")
        for f in sorted(os.listdir(folder)):
            if f.endswith(".cpp"):
                for m in re.finditer(r"\nvoid (llama_model_\w+)::load_arch_hparams\("
                                     r"llama_model_loader &\s*(\w*)\) \{\n(.*?)\n\}\n",
                                     read(src, os.path.join("src", "models", f)), re.S):
                    self.body[m.group(1)] = m.group(3) if m.group(2) == "ml" else ""

    def required(self, cls, arch, enum):
        """[(how, GGUF type, key)] cls's load_arch_hparams requires of a model of arch
        (LLM_ARCH_ enum)."""
        while cls not in self.body and cls in self.parent:
            cls = self.parent[cls]
        out = []
        self.walk(self.body.get(cls), cls, arch, enum, out)
        return out

    def walk(self, body, cls, arch, enum, out):
        """Appends the requirements of a function body to out; False where it stopped
        early. A block that can throw but not return goes on: past it, llama.cpp reads
        on; where it throws, the model is refused anyway."""
        if body is None:
            fail("no load_arch_hparams of %s" % cls)
        for st in statements(body):
            flat = " ".join(st.split())
            if re.search(r"\breturn\b", st):
                return False
            m = re.match(r"if \(arch == (LLM_ARCH_\w+)\) \{(.*)\}$", flat)
            if m and "{" not in m.group(2) and "}" not in m.group(2):
                if m.group(1) == enum and not self.walk(m.group(2).replace(";", ";\n"), cls,
                                                        arch, enum, out):
                    return False
                continue
            m = re.match(r"if \(!ml\.(get_arr|get_key)\((LLM_KV_\w+), [\w.]+, false\)\) \{ "
                         r"throw [^;{}]*; \}$", flat)
            if m:   # an optional read whose absence throws: required
                self.add((m.group(1), m.group(2), ["x"]), arch, out, typed=False)
                continue
            if "{" in st or re.match(r"(if|else|switch|for|while|do|throw)\b", flat):
                continue
            m = re.match(r"(llama_model_\w+)::load_arch_hparams\(ml\);$", flat)
            if m:
                if not self.walk(self.body.get(m.group(1)), m.group(1), arch, enum, out):
                    return False
                continue
            for call in reads(flat):
                if call is None:
                    return False
                self.add(call, arch, out)
        return True

    def add(self, call, arch, out, typed=True):
        """A read (how, LLM_KV_ name, arguments after it) appended to out when required
        (its type too when typed and known)."""
        how, kv, args = call
        n_args = {"get_key": 1, "get_arr": 1, "get_arr_n": 1, "get_key_or_arr": 2}
        if args[-1] in ("false", "0"):
            return
        if args[-1] != "true" and len(args) != n_args[how] and not (
                how == "get_key_or_arr" and len(args) == 1):   # its scalar form
            fail("a read of %s with arguments %s" % (kv, args))
        if kv not in self.kv:
            fail("no name for %s" % kv)
        key = self.kv[kv].replace("%s", arch, 1)
        if "%" in key:
            fail("key %s of %s takes more than the architecture" % (key, kv))
        vtype = ANY_TYPE
        f = re.match(r"hparams\.(\w+)$", args[0])
        if typed and how == "get_key" and f and f.group(1) in self.field:
            vtype = GGUF_TYPE[self.field[f.group(1)]]
        out.append(({"get_key": "k", "get_key_or_arr": "o", "get_arr": "a",
                     "get_arr_n": "n"}[how], vtype, key))


def reads(flat):
    """The ml.get_* reads of one simple statement: (how, LLM_KV_ name, [arguments]), or
    None for a read this reading cannot place (one that is not the whole statement or
    the value of a declaration: it may be required or not by what surrounds it)."""
    out = []
    for m in re.finditer(r"ml\.(get_key_or_arr|get_key|get_arr_n|get_arr)\(", flat):
        depth, i, args, cur = 1, m.end(), [], ""
        while i < len(flat) and depth:
            c = flat[i]
            depth += (c == "(") - (c == ")")
            if depth == 1 and c == ",":
                args.append(cur.strip())
                cur = ""
            elif depth:
                cur += c
            i += 1
        args.append(cur.strip())
        whole = flat[:m.start()] in ("",) or re.match(r"^(const )?[\w:]+ \w+ = $", flat[:m.start()])
        rest = flat[i:].strip()
        if depth or not args[0].startswith("LLM_KV_"):
            return [None]
        if not whole or rest != ";":
            if args[-1] in ("false", "0"):
                continue   # an optional read anywhere requires nothing
            return [None]
        out.append((m.group(1), args[0], args[1:]))
    return out


def statements(body):
    """The top-level statements of a function body, comments left out: each a simple
    statement up to its ';' or a block up to its closing '}'."""
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    out, cur, depth = [], "", 0
    for line in body.split("\n"):
        s = re.sub(r"//.*", "", line)
        if depth == 0 and not cur and not s.strip():
            continue
        cur += s + "\n"
        depth += s.count("{") - s.count("}")
        if depth == 0 and s.rstrip().endswith((";", "}")):
            out.append(cur)
            cur = ""
    if cur.strip():
        out.append(cur)
    return out


def render(table, source):
    lines = ["/* Generated by gen_llama_archs.py from llama.cpp's source (the pinned llama.cpp",
             " * of tests/llama): do not edit. */",
             '#include "llama_archs.h"', ""]
    rows = []
    for e, name, cls in table:
        keys = "NULL"
        if cls:
            req = source.required(cls, name, e)
            if req:
                keys = "keys_" + re.sub(r"\W", "_", name)
                lines.append("static const struct llama_arch_key %s[] = {" % keys)
                for how, vtype, key in req:
                    lines.append("\t{ '%s', %d, \"%s\" }," % (how, vtype, key))
                lines += ["\t{ 0, 0, NULL },", "};", ""]
        rows.append('\t{ "%s", %s, %s },' % (name, "true" if cls else "false", keys))
    lines.append("const struct llama_arch llama_arch_table[] = {")
    lines += rows
    lines += ["};", "",
              "const size_t llama_arch_count = sizeof llama_arch_table / sizeof llama_arch_table[0];",
              ""]
    return "\n".join(lines)


def main():
    args = sys.argv[1:]
    check = args[:1] == ["--check"]
    if check:
        args = args[1:]
    if len(args) != 2:
        fail("usage: gen_llama_archs.py [--check] LLAMA_CPP_DIR OUTPUT.c")
    text = render(archs(args[0]), Source(args[0]))
    if check:
        with open(args[1]) as f:
            if f.read() != text:
                print("%s differs from what %s's llama.cpp gives: run gen_llama_archs.py"
                      % (args[1], args[0]), file=sys.stderr)
                sys.exit(1)
        return
    with open(args[1], "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
