#!/usr/bin/env python3
"""The man page as `man` prints it has no words glued together. Text left after the
arguments of an alternating-font macro (`.BR "Errors at mount" ). Give ...`) is taken
as more arguments, each set against the last without a space: "(see Errors at
mount).Giveanotherserver...". Such a run shows as a letter right after a closing
parenthesis (or after one and a stop, comma, colon or semicolon; a method call in an
example, "(a == m).all()", is not one), or right after a semicolon. Also: groff's own warnings.

usage: check_man.py MAN_PAGE   (exits 77, skipped, where `man` is not installed)"""
import os
import re
import shutil
import subprocess
import sys

# (not a method call in an example: "(a == m).all()", "np.load(p).shape)")
GLUED = re.compile(r"\)[,:;]?[A-Za-z]|\)\.[A-Za-z](?![A-Za-z_]*[()])|;[A-Za-z]")


def render(page):
    """The page as man prints it: one long line per paragraph (no filling to a width
    to hide a glued run at a line's end), no hyphenation, no fonts."""
    env = dict(os.environ, MANWIDTH="1000", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    env.pop("MANPAGER", None)
    env.pop("PAGER", None)
    r = subprocess.run(["man", "--warnings", "-l", page], env=env, capture_output=True,
                       text=True, check=True)
    text = re.sub(r".\x08", "", r.stdout)   # overstrike bold and underline
    return text, r.stderr


def glued(text):
    """[(line number, excerpt)] of every glued run in text."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in GLUED.finditer(line):
            out.append((n, line[max(0, m.start() - 30):m.end() + 20].strip()))
    return out


def main():
    if not shutil.which("man"):
        print("man is not installed: skipping", file=sys.stderr)
        sys.exit(77)
    # the check itself, on the two runs that once were in the page
    assert glued("(see Errors at mount).Giveanotherserver") != []
    assert glued("see REMOTE MODELS);alarger max_threads") != []
    assert glued("(see Errors at mount). Give another; a (b) c, d.") == []
    assert glued("print((a == m).all(), np.load(p).shape)") == []
    text, warnings = render(sys.argv[1])
    bad = glued(text)
    for n, excerpt in bad:
        print("%s: rendered line %d: glued words: %s" % (sys.argv[1], n, excerpt))
    if warnings.strip():
        print("groff warnings:\n" + warnings)
    sys.exit(1 if bad or warnings.strip() else 0)


if __name__ == "__main__":
    main()
