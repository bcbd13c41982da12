#!/usr/bin/env python3
"""The man page as `man` prints it has no words glued together. Text left after the
arguments of an alternating-font macro (`.BR "Errors at mount" ). Give ...`) is taken
as more arguments, each set against the last without a space: "(see Errors at
mount).Giveanotherserver...". Such a run shows as a letter right after a closing
parenthesis (or after one and a stop, comma, colon or semicolon; a method call in an
example, "(a == m).all()", is not one), or right after a semicolon; or as a letter
right after a section's name and a comma, colon or semicolon, or a stop and a capital
("see Faults under REMOTE MODELS.Connectinggivesupafter10s"), or right after an
upper-case section name itself. Also: groff's own warnings.

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


def titles(source):
    """The names of the page's sections (.SH) and of its subsections (.SS) that are
    words (not file names such as stats.tsv, which a word may follow in an example)."""
    out = []
    for m in re.finditer(r'^\.S([HS]) +"?(.*?)"?$', source, re.M):
        name = m.group(2).replace("\\-", "-").replace("\\", "")
        if m.group(1) == "H" or re.fullmatch(r"[A-Z][A-Za-z ]*", name):
            out.append(name)
    return out


def after_title(names):
    """A pattern of a letter glued after one of names: after a comma, colon or
    semicolon, after a stop as a sentence starts, or, for an upper-case name, right
    after it."""
    upper = [re.escape(n) for n in names if n.isupper()]
    # after a stop, the start of a sentence (NAME.f32 is a file name)
    alts = ["(?:%s)(?:[,:;]+[A-Za-z]|\\.[A-Z][a-z])" % "|".join(re.escape(n) for n in names)]
    if upper:
        alts.append("(?:%s)[a-z]" % "|".join(upper))
    return re.compile(r"\b(?:%s)" % "|".join(alts))


def glued(text, names=("REMOTE MODELS", "Faults")):
    """[(line number, excerpt)] of every glued run in text (names: the section names
    that words may be glued after)."""
    out = []
    title = after_title(names)
    for n, line in enumerate(text.splitlines(), 1):
        for m in list(GLUED.finditer(line)) + list(title.finditer(line)):
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
    assert glued("see Faults under REMOTE MODELS.Connectinggivesupafter10s") != []
    assert glued("see REMOTE MODELSfor more") != []
    assert glued("see Faults,and more") != []
    assert glued("see Faults under REMOTE MODELS. Connecting; the REMOTE MODELS' URLs") == []
    assert glued("tensors/NAME.f32", ("NAME",)) == []
    with open(sys.argv[1]) as f:
        names = titles(f.read())
    assert "REMOTE MODELS" in names and "Faults" in names and "stats.tsv" not in names
    text, warnings = render(sys.argv[1])
    bad = glued(text, names)
    for n, excerpt in bad:
        print("%s: rendered line %d: glued words: %s" % (sys.argv[1], n, excerpt))
    if warnings.strip():
        print("groff warnings:\n" + warnings)
    sys.exit(1 if bad or warnings.strip() else 0)


if __name__ == "__main__":
    main()
