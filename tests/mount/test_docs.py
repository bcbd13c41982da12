#!/usr/bin/env python3
"""The examples in README.md and in the man page's THE TREE section, run on the bundled
model: each `$ COMMAND` (continued over lines while a quote is open) runs with bash in
the mount point, and what it prints must be the lines that follow it up to the next
`$ ` or the end of the example, so the documents cannot drift from what ggufs does."""
import os
import re
import shlex
import subprocess
import unittest

import ggufs_mount as gm

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def examples(lines):
    """[(command, expected output)] of one example block, given as its lines."""
    out = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        cmd = lines[i][2:]
        i += 1
        while True:
            try:
                shlex.split(cmd, comments=True)
                break
            except ValueError:  # a quote still open: the command goes on
                if i >= len(lines):
                    raise AssertionError("unterminated command: " + cmd)
                cmd += "\n" + lines[i]
                i += 1
        want = []
        while i < len(lines) and not lines[i].startswith("$ "):
            want.append(lines[i])
            i += 1
        out.append((cmd, "".join(l + "\n" for l in want)))
    return out


def readme_blocks():
    """The fenced blocks of README.md that hold `$ ` examples."""
    text = open(os.path.join(ROOT, "README.md")).read()
    blocks = re.findall(r"^```\n(.*?)^```$", text, re.M | re.S)
    return [b.splitlines() for b in blocks if b.startswith("$ ")]


def roff_text(line):
    """A line of a man page's .nf block as printed: \\- is -, \\e is \\, \\& nothing."""
    return line.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "")


def man_blocks():
    """The .nf/.fi blocks of the man page's THE TREE section that hold `$ ` examples."""
    text = open(os.path.join(ROOT, "man", "ggufs.1")).read()
    section = text[text.index("\n.SH THE TREE\n"):text.index("\n.SH NAMES\n")]
    blocks = re.findall(r"^\.nf\n(.*?)^\.fi$", section, re.M | re.S)
    return [[roff_text(l) for l in b.splitlines()] for b in blocks if b.startswith("$ ")]


# The Debian package that gives each command the examples use (beyond coreutils).
PACKAGE_OF = {"getfattr": "attr", "jq": "jq", "hexdump": "bsdextrautils",
              "python3": "python3-numpy", "man": "man-db"}


class Packages(unittest.TestCase):
    def test_try_it_installs_what_the_examples_use(self):
        """The README's first command (Try it) installs the package of every command
        that an example of the README or the man page runs: a newcomer who typed only
        it can run them all (getfattr's attr was missing)."""
        text = open(os.path.join(ROOT, "README.md")).read()
        first = re.search(r"^    apt-get update && apt-get install -y ([^&]*)&&", text, re.M)
        self.assertIsNotNone(first, "the Try it command")
        installed = set(first.group(1).split())
        commands = [cmd for block in readme_blocks() + man_blocks()
                    for cmd, _ in examples(block)]
        self.assertGreaterEqual(len(commands), 15)
        for tool, package in PACKAGE_OF.items():
            used = [c for c in commands if re.search(r"(^|[|;&(]\s*)%s\b" % tool, c)]
            if used:
                self.assertIn(package, installed, "%s (for %r)" % (package, used[0]))


class Examples(gm.MountedTestCase):
    MODEL = gm.TINY

    def run_examples(self, blocks):
        env = dict(os.environ, PATH="/usr/bin:/bin:/usr/sbin:/sbin", LC_ALL="C.UTF-8")
        count = 0
        for block in blocks:
            for cmd, want in examples(block):
                with self.subTest(command=cmd):
                    r = subprocess.run(["bash", "-c", cmd], cwd=self.mount.path, env=env,
                                       stdin=subprocess.DEVNULL, capture_output=True,
                                       text=True, timeout=60)
                    self.assertEqual(r.stderr, "")
                    self.assertEqual(r.stdout, want)
                    count += 1
        return count

    def test_readme(self):
        self.assertGreaterEqual(self.run_examples(readme_blocks()), 5)

    def test_man_page(self):
        self.assertGreaterEqual(self.run_examples(man_blocks()), 10)

    def test_parser(self):
        """Multi-line commands and outputs are cut where the documents mean them."""
        got = examples(["$ echo 'a", "b'", "a", "b", "$ true  # it's fine", "$ x", "", "y"])
        self.assertEqual(got, [("echo 'a\nb'", "a\nb\n"), ("true  # it's fine", ""),
                               ("x", "\ny\n")])


if __name__ == "__main__":
    gm.main()
