#!/usr/bin/env python3
"""--tensor-type patterns (lib/1-format/ecma_regex.h) against std::regex itself, which
llama-quantize compiles them with: the same patterns and tensor names given to
ecma_regex_dump and to ecma_regex_std.cpp (g++, libstdc++), which must agree on every
pattern's compiling or not and every search's answer. The patterns: a fixed list of
the places where ECMAScript and PCRE2 part (escapes, brackets, stacked quantifiers,
lookaheads, backreferences, anchors, braces) and random ones made of such pieces, a
seeded sample. A search libstdc++ runs for more than 2 s (catastrophic backtracking) is
not compared: there ecma_regex gives up or answers, where llama-quantize would hang.

    python3 tests/ecma_regex_ref.py BUILD/tests/ecma_regex_dump [COUNT]

Skipped (77) without g++."""
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXED = [
    r"blk\.[0-3]\.attn_v", r"^blk\.[02468]\.attn_v\.weight$", r"ffn_(up|gate)", r"attn",
    r"\a", r"\z", r"\e", r"\k", r"\p", r"\h", r"\g", r"\o", r"\q", r"\cA", r"\ca", r"\c",
    r"\x61", r"\x6", r"\u0062", r"\u00", r"\0", r"\v", r"\t", r"\-", r"\/", r"\.", "\\",
    r"a*+", r"a**", r"a{2}{3}", r"a?*", r"a{1,}?", r"(a)*+", r"a{,2}", r"a{2,1}", r"a{x",
    r"a{3", r"a{", r"}", r"]", r"[]", r"[^]", r"[]*?", r"[^]+", r"[a-]", r"[z-a]",
    r"[\d]", r"[\w-z]", r"[\b]", r"[\B]", r"[[:alpha:]]", r"[[:digit:]]+", r"[[:foo:]]",
    r"[[.a.]]", r"[[=b=]]", r"[^[.-.]]", r"[[.0.]]", r"[[=_=]]", r"[[.a", r"[[", r"[a", r"(?<=a)b", r"(?<!a)b", r"(?i)a", r"(?=b)", r"(?!k)", r"(?:a)",
    r"(?P<n>a)", r"(*UTF)a", r"(*", r"\1(a)", r"(a)\1", r"(a)|\1b", r"(a)(b)\2", r"(a)\10",
    r"^*", r"$*", r"\b*", r"(?=a)*", r"*a", r"a|*", r"()", r"(|a)", r"x|", r"(", r")",
    r"a)", r".", r"x$", r"^x", r"\b\b", r"\B", r"\d+\.", r"\w+_\w+", r"\s", r"a\Qb",
]
PIECES = ["a", "b", "l", "k", "\\.", ".", "\\d", "\\w", "\\s", "\\D", "[0-3]", "[^a]",
          "[]", "[^]", "(a|b)", "(?:bl)", "\\b", "^", "$", "\\1", "\\0", "\\x61", "\\u0062",
          "\\ca", "\\z", "\\e", "\\p", "\\v", "[\\d]", "[\\b]", "[a-]", "[[:alpha:]]",
          "(?=b)", "(?!k)", "_", "\\", "(", ")", "{", "}", "|", "[", "\\-", "blk", "attn_v",
          "\\.weight", "ffn_", "[0-9]+"]
QUANTS = ["", "", "", "*", "+", "?", "{2}", "{1,}", "{0,2}", "*?", "+?", "**", "{2}{1}",
          "*+", "{", "{x}", "{2,1}"]
NAMES = ["blk.0.attn_v.weight", "blk.12.ffn_down.weight", "token_embd.weight",
         "output.weight", "ab", "aab", "b", "blk.3.attn_k.weight", "a.b", "", "kkk",
         "blk.1.attn_q.weight", "a\x0bb", "x\ry"]


def cases(count):
    rng = random.Random(46)
    pats = list(FIXED)
    for _ in range(count):
        pats.append("".join(rng.choice(PIECES) + rng.choice(QUANTS)
                            for _ in range(rng.randint(1, 5))))
    return [(p, n) for p in pats for n in (NAMES if p in FIXED else rng.sample(NAMES, 3))]


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    dump = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 800
    if shutil.which("g++") is None:
        print("skipped: no g++")
        return 77
    with tempfile.TemporaryDirectory(prefix="ggufs-ecma-") as d:
        std = os.path.join(d, "ecma_regex_std")
        subprocess.run(["g++", "-std=c++17", "-O1", "-o", std,
                        os.path.join(HERE, "ecma_regex_std.cpp")], check=True)
        todo = cases(count)
        text = "".join("%s\t%s\n" % pc for pc in todo).encode()
        want = subprocess.run([std], input=text, stdout=subprocess.PIPE, check=True,
                              timeout=1800).stdout.decode().split("\n")[:-1]
        got = subprocess.run([dump], input=text, stdout=subprocess.PIPE, check=True,
                             timeout=600).stdout.decode().split("\n")[:-1]
    if len(want) != len(todo) or len(got) != len(todo):
        print("answers: %d std::regex, %d ecma_regex for %d cases" % (len(want), len(got),
                                                                     len(todo)))
        return 1
    bad = timeouts = 0
    for (p, n), w, g in zip(todo, want, got):
        if w == "TIMEOUT":
            timeouts += 1
            continue
        if w != g:
            bad += 1
            if bad <= 20:
                print("%r on %r: std::regex %s, ecma_regex %s" % (p, n, w, g))
    print("%d cases, %d differ, %d not compared (std::regex ran past 2 s)"
          % (len(todo), bad, timeouts))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
