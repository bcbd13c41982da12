#!/usr/bin/env python3
"""What an edit's close makes, and what the files show right after it, with -o
edits=FILE (issue 38 items 1-5), on real mounts:
- model.gguf is a new inode in each edit state: opens and fstat's of it while edits
  commit never fail (two readers, one writer of general.name, with and without
  passthrough), and an open from before an edit still fstat's and reads its own state;
- a write refused at write(2) (EFBIG past 64 MiB, EINVAL for what cannot parse) makes
  the close fail with the same error and nothing of the text a value: the old value
  stays and FILE is byte for byte as it was (cat of a big file, a Python write of
  64 MiB + 1, a writer's own bytes); so does an ftruncate past 64 MiB (issue 43
  item 10);
- a truncation alone (open with O_TRUNC, close: ": > KEY", cp /dev/null) is made before
  the close returns: the key's size, its bytes and gguf.json's size agree at once,
  after a short and after a big value, and FILE holds it at once (issue 43 item 12);
- emptying a number or bool that way fails the close with EINVAL (cp /dev/null, a
  Python open for writing), the value and FILE unchanged, while "echo 7 > KEY" still
  makes 7 with nothing refused;
- an edit refused at close because its value is too large (EFBIG) leaves FILE byte for
  byte.

Usage: test_edits_closes.py GGUFS_BINARY [SLOW_SAVE_SO] (without it, saves of FILE are
not slowed: the tests are the same, but an edit made late may be missed on old code)."""
import contextlib
import errno
import json
import os
import subprocess
import sys
import threading
import time
import unittest

import ggufs_mount as gm

RUN_SECONDS = 3.0
SLOW_SAVE = None     # the preloaded library of slow_save.c (the second argument)
SLOW_SAVE_MS = 300   # how long each save of FILE takes with it
ROUNDS = 3           # shell redirections of test_empty_redirection_made_before_close_returns


def meta(m, key):
    return gm.read_file(m.p("metadata", key))


def edits_of(path):
    with open(path) as f:
        return json.load(f)


def sh(m, cmd):
    """Runs cmd with bash in m's metadata/: its exit status."""
    return subprocess.run(["bash", "-c", cmd], cwd=m.p("metadata"),
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


class Closes(gm.EditsCase):
    prefix = "ggufs-closes-"

    @contextlib.contextmanager
    def slow_saving_mount(self):
        """A mount whose daemon saves FILE slowly (slow_save.c preloaded, SLOW_SAVE_MS),
        when the library was given; else a plain one."""
        env = dict(os.environ)
        if SLOW_SAVE:
            os.environ.update(LD_PRELOAD=SLOW_SAVE, GGUFS_SLOW_SAVE_FILE=self.file,
                              GGUFS_SLOW_SAVE_MS=str(SLOW_SAVE_MS),
                              ASAN_OPTIONS=env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
        m = self.mount()
        try:
            m.__enter__()
        finally:
            os.environ.clear()
            os.environ.update(env)
        try:
            yield m
        except BaseException:
            m.__exit__(*sys.exc_info())
            raise
        m.__exit__(None, None, None)

    def readers_while_editing(self, opts):
        """Two threads open, fstat, read a byte of and close model.gguf as fast as they
        can while a third writes general.name: (opens, failures, edits)."""
        with self.mount(opts=opts) as m:
            model = m.p("model.gguf")
            stop = time.monotonic() + RUN_SECONDS
            counts = {"opens": 0, "edits": 0}
            failures = []
            lock = threading.Lock()

            def reader():
                while time.monotonic() < stop:
                    try:
                        fd = os.open(model, os.O_RDONLY)
                        try:
                            st = os.fstat(fd)
                            self.assertGreater(st.st_size, 0)
                            self.assertEqual(len(os.pread(fd, 4, 0)), 4)
                        finally:
                            os.close(fd)
                    except OSError as e:
                        with lock:
                            failures.append(e)
                    with lock:
                        counts["opens"] += 1

            def writer():
                n = 0
                while time.monotonic() < stop:
                    gm.put(m.p("metadata", "general.name"), b"v%d\n" % n)
                    n += 1
                counts["edits"] = n

            threads = [threading.Thread(target=reader) for _ in range(2)]
            threads.append(threading.Thread(target=writer))
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=RUN_SECONDS + 60)
                self.assertFalse(t.is_alive(), "a thread hung")
            return counts["opens"], failures, counts["edits"]

    def test_model_opens_during_edits(self):
        """Item 1: no open or fstat of model.gguf fails while edits commit."""
        for opts in ((), ("-o", "passthrough=no")):
            with self.subTest(opts=opts):
                opens, failures, edits = self.readers_while_editing(opts)
                self.assertGreater(edits, 5)
                self.assertGreater(opens, 50)
                self.assertEqual(failures[:3], [], "%d of %d opens failed"
                                 % (len(failures), opens))
                os.unlink(self.file)

    def test_fstat_of_an_older_state(self):
        """Item 1: an open model.gguf of an older state fstat's (its own size) and reads
        after edits made other states current, and after many more."""
        with self.mount() as m:
            model = m.p("model.gguf")
            fd = os.open(model, os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                head = os.pread(fd, 64, 0)
                for n in range(12):   # more states than are kept without a holder
                    gm.put(m.p("metadata", "general.name"), b"a longer name %d " % n + b"n" * 200 + b"\n")
                    self.assertEqual(os.fstat(fd).st_size, size)
                self.assertNotEqual(os.stat(model).st_size, size)
                self.assertEqual(os.pread(fd, 64, 0), head)
            finally:
                os.close(fd)

    def test_refused_write_fails_close(self):
        """Items 2 and 5: cat of a file past 64 MiB fails, and nothing of it is made a
        value: the key holds what the shell's "> KEY" made at its first close (empty),
        FILE that and nothing of cat's; a writer's EFBIG or EINVAL write fails its close
        with the same error, later writes too, and the old value stays, FILE byte for
        byte."""
        big = os.path.join(self.tmp, "big")
        with open(big, "wb") as f:
            f.truncate((64 << 20) + 4096)
        with self.mount() as m:
            gm.put(m.p("metadata", "general.name"), b"kept\n")
            self.assertNotEqual(sh(m, "cat %s > general.name" % big), 0)
            self.assertEqual(meta(m, "general.name"), b"\n")
            self.assertEqual(os.stat(m.p("metadata", "general.name")).st_size, 1)
            self.assertEqual(edits_of(self.file)["set"]["general.name"],
                             {"type": "string", "value": ""})
            before = gm.read_file(self.file)

            cases = [("general.name", lambda fd: os.pwrite(fd, b"x", 64 << 20), errno.EFBIG),
                     ("llama.context_length", lambda fd: os.write(fd, b"12x"), errno.EINVAL)]
            for key, bad, code in cases:
                with self.subTest(key=key):
                    old = meta(m, key)
                    fd = os.open(m.p("metadata", key), os.O_WRONLY | os.O_TRUNC)
                    try:
                        os.write(fd, b"1")
                        with self.assertRaises(OSError) as e:
                            bad(fd)
                        self.assertEqual(e.exception.errno, code)
                        with self.assertRaises(OSError) as e:
                            os.pwrite(fd, b"7\n", 0)   # nothing after it is taken
                        self.assertEqual(e.exception.errno, code)
                    finally:
                        with self.assertRaises(OSError) as e:
                            os.close(fd)
                        self.assertEqual(e.exception.errno, code)
                    self.assertEqual(meta(m, key), old)
                    self.assertEqual(gm.read_file(self.file), before)

    def test_truncation_alone_seen_at_once(self):
        """Item 3: an open with O_TRUNC and a close empty a string key before anything
        after the close looks: size and bytes agree, gguf.json's too."""
        def check(m, key):
            k = m.p("metadata", key)
            st = os.stat(k).st_size
            data = gm.read_file(k)
            j = m.p("gguf.json")
            self.assertEqual((st, data), (1, b"\n"))
            self.assertEqual(os.stat(j).st_size, len(gm.read_file(j)))

        big = b"w" * (8 << 20) + b"\n"
        with self.mount() as m:
            for value in (b"short\n", big, b"short again\n", big):
                gm.put(m.p("metadata", "general.name"), value)
                self.assertEqual(os.stat(m.p("metadata", "general.name")).st_size, len(value))
                os.close(os.open(m.p("metadata", "general.name"), os.O_WRONLY | os.O_TRUNC))
                check(m, "general.name")
                gm.put(m.p("metadata", "general.name"), value)
                r = subprocess.run(["bash", "-c", ": > general.name; stat -c %s general.name; "
                                    "wc -c < general.name"], cwd=m.p("metadata"),
                                   capture_output=True, text=True)
                self.assertEqual(r.stdout.split(), ["1", "1"])
                check(m, "general.name")

    def test_emptying_a_number_fails_close(self):
        """Item 4: a number emptied by a truncation alone is refused at close (EINVAL),
        and kept; "echo 7 > KEY" still makes 7, nothing refused."""
        with self.mount() as m:
            k = m.p("metadata", "llama.context_length")
            before = gm.read_file(self.file)

            def refused():
                return int(os.getxattr(m.path, "user.ggufs.edits_refused"))

            self.assertNotEqual(sh(m, "cp /dev/null llama.context_length"), 0)
            with self.assertRaises(OSError) as e:
                open(k, "w").close()
            self.assertEqual(e.exception.errno, errno.EINVAL)
            sh(m, ": > llama.context_length")   # a shell tells no close's error
            self.assertEqual(meta(m, "llama.context_length"), b"2048\n")
            self.assertEqual(gm.read_file(self.file), before)
            deadline = time.monotonic() + 10
            while refused() < 3 and time.monotonic() < deadline:
                time.sleep(0.05)   # each is counted at its last close
            self.assertEqual(refused(), 3)
            self.assertIn("is not a decimal uint32",
                          os.getxattr(m.path, "user.ggufs.last_error").decode())
            self.assertEqual(sh(m, "echo 7 > llama.context_length"), 0)
            self.assertEqual(meta(m, "llama.context_length"), b"7\n")
            self.assertEqual(refused(), 3)

    def test_refused_truncation_fails_close(self):
        """Issue 43 item 10: an ftruncate of a writer past the 64 MiB a key's text takes
        is refused (EFBIG) as a write(2) past it is: every later write and truncation of
        that open file fails with it, its close fails with it, and nothing of its text
        becomes the value: the key and FILE are byte for byte as they were."""
        with self.mount() as m:
            k = m.p("metadata", "general.name")
            gm.put(k, b"kept\n")
            before = gm.read_file(self.file)
            for flags in (os.O_WRONLY | os.O_TRUNC, os.O_WRONLY, os.O_RDWR):
                with self.subTest(flags=flags):
                    fd = os.open(k, flags)
                    try:
                        os.write(fd, b"first")
                        with self.assertRaises(OSError) as e:
                            os.ftruncate(fd, (64 << 20) + 1)
                        self.assertEqual(e.exception.errno, errno.EFBIG)
                        later = [lambda: os.pwrite(fd, b"valid text\n", 0),
                                 lambda: os.ftruncate(fd, 0)]
                        for step in later:   # nothing after it is taken
                            with self.assertRaises(OSError) as e:
                                step()
                            self.assertEqual(e.exception.errno, errno.EFBIG)
                    finally:
                        with self.assertRaises(OSError) as e:
                            os.close(fd)
                        self.assertEqual(e.exception.errno, errno.EFBIG)
                    self.assertEqual(meta(m, "general.name"), b"kept\n")
                    self.assertEqual(gm.read_file(self.file), before)

    def test_empty_redirection_made_before_close_returns(self):
        """Issue 43 item 12: ": > KEY" from a shell is made before the shell's close
        returns, as every other edit is: read at once after the shell exits (no wait),
        FILE holds the key's empty string and metadata/KEY shows it, every round. Each
        save of FILE is made slow (slow_save.c preloaded in the daemon, SLOW_SAVE_MS),
        so that an edit made after the close returned is seen late every time. A number,
        which has no empty value, is refused at that close: a program's close fails with
        EINVAL (a shell tells no close's error), the key and FILE stay as they were."""
        def sh_exits(cmd):
            return subprocess.run(["sh", "-c", cmd], cwd=m.p("metadata"),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  timeout=60).returncode

        with self.slow_saving_mount() as m:
            for n in range(ROUNDS):
                gm.put(m.p("metadata", "general.name"), b"kept %d\n" % n)
                self.assertEqual(edits_of(self.file)["set"]["general.name"]["value"],
                                 "kept %d" % n)
                self.assertEqual(sh_exits(": > general.name"), 0)
                self.assertEqual(edits_of(self.file)["set"]["general.name"],
                                 {"type": "string", "value": ""}, "round %d" % n)
                self.assertEqual(meta(m, "general.name"), b"\n")
            before = gm.read_file(self.file)
            self.assertEqual(sh_exits(": > llama.context_length"), 0)
            self.assertEqual(gm.read_file(self.file), before)
            self.assertEqual(meta(m, "llama.context_length"), b"2048\n")
            with self.assertRaises(OSError) as e:
                open(m.p("metadata", "llama.context_length"), "w").close()
            self.assertEqual(e.exception.errno, errno.EINVAL)
            self.assertEqual(gm.read_file(self.file), before)

    def test_too_large_keeps_file(self):
        """Item 5: an edit refused for its size leaves the value and FILE byte for byte:
        a Python write of 64 MiB + 1 bytes (EFBIG at write and at close), an array of
        17 Mi empty lines (past the 128 MiB a value may take: EFBIG at close)."""
        with self.mount() as m:
            gm.put(m.p("metadata", "general.name"), b"before\n")
            before = gm.read_file(self.file)
            f = open(m.p("metadata", "general.name"), "wb")
            with self.assertRaises(OSError) as e:
                try:
                    f.write(b"z" * ((64 << 20) + 1))   # the last byte may wait in the buffer
                finally:
                    f.close()
            self.assertEqual(e.exception.errno, errno.EFBIG)
            self.assertTrue(f.closed)
            self.assertEqual(meta(m, "general.name"), b"before\n")
            self.assertEqual(gm.read_file(self.file), before)
            tokens = meta(m, "tokenizer.ggml.tokens")
            with self.assertRaises(OSError) as e:
                gm.put(m.p("metadata", "tokenizer.ggml.tokens"), b"\n" * (17 << 20))
            self.assertEqual(e.exception.errno, errno.EFBIG)
            self.assertEqual(meta(m, "tokenizer.ggml.tokens"), tokens)
            self.assertEqual(gm.read_file(self.file), before)


if __name__ == "__main__":
    if len(sys.argv) > 2 and os.path.isfile(sys.argv[2]):
        SLOW_SAVE = os.path.abspath(sys.argv.pop(2))
    gm.main()
