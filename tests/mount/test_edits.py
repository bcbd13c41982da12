#!/usr/bin/env python3
"""Metadata edits, -o edits=FILE (issue 19), on real mounts:
- every key of the bundled model and of the type vectors copied out and back changes
  nothing: FILE holds no edit and model.gguf is the file byte for byte;
- the edits of the issue's example (a name, a 64 KiB chat template, a key deleted, a new
  uint32 key by touch + setfattr + write, a rename, a 32000-token array cut to 3 and a
  150,000-element array made and cut) show in metadata/ (names, sizes, contents,
  xattrs), gguf.json, summary.txt and model.gguf, which parses back with ggufs into the
  same keys and the same tensor bytes; a remount with FILE has them all;
- FILE made for another model, or not parsable, is refused with one line; a missing
  FILE is created; without edits every write is EROFS;
- refusals: general.alignment and split.* EPERM, a name no key has EINVAL, a value that
  does not parse EINVAL at write or at close with the old value kept; writes at offsets,
  sparse writes, truncate to odd sizes, two writers of one key (last close wins);
- a reader that opened gguf.json before an edit reads the old text whole;
- a split model's edits show in its merged model.gguf;
- with allow_other another user reads but cannot write;
- kill -9 during a loop of edits: the remount shows a state some close completed;
- unmounted and at once mounted again on the same FILE while the old daemon still exits
  holding FILE (tests/quant/slow_close.c preloaded in it): the new mount waits for it
  and has the edits; a second mount while the first is mounted is refused at once.

Usage: test_edits.py GGUFS_BINARY [SLOW_CLOSE_SO] (the quick remount is skipped
without it)."""
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import ggufs_mount as gm
from modelfile_check import parses_back

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "remote"))
from remote_common import split_gguf  # noqa: E402

ALLTYPES = os.path.join(gm.VECTORS, "alltypes.gguf")
SLOW_CLOSE = None      # the preloaded library of slow_close.c (the second argument)
SLOW_CLOSE_MS = 3000   # how long the old daemon holds FILE past the unmount, well under
                       # the wait of a new mount (EDITS_LEAVING_WAIT_S, 10 s)


def meta(m, key):
    return gm.read_file(m.p("metadata", key))


def vim(path, cmd):
    """vim -es running ex command cmd on path and saving it, its save outside /tmp
    ('backupskip' emptied: the mount is in /tmp): its completed process."""
    return subprocess.run(["vim", "-N", "-es", "-u", "NONE", "-i", "NONE",
                           "-c", "set backupskip= writebackup nobackup backupcopy=auto",
                           "-c", cmd, "-c", "wq", path],
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=60)


def keys_in_order(m):
    """metadata/'s names in the mount's listing order (the model's key order)."""
    return json.loads(gm.read_file(m.p("gguf.json")))["metadata"].keys() and \
        list(json.loads(gm.read_file(m.p("gguf.json")))["metadata"])


def edits_of(path):
    with open(path) as f:
        return json.load(f)


class Edits(gm.EditsCase):
    prefix = "ggufs-edits-"

    def test_round_trip_every_key(self):
        for model in (gm.TINY, ALLTYPES):
            with self.subTest(model=model), self.mount(model) as m:
                keys = sorted(os.listdir(m.p("metadata")))
                for k in keys:
                    text = meta(m, k)
                    gm.put(m.p("metadata", k), text)
                    self.assertEqual(meta(m, k), text, k)
                doc = edits_of(self.file)
                self.assertEqual((doc["set"], doc["deleted"], doc["renamed"]), ({}, [], {}))
                self.assertEqual(gm.sha256_file(m.p("model.gguf")), gm.sha256_file(model))
                self.assertEqual(m.stderr(), "")
            os.unlink(self.file)

    def test_padding_not_zeros(self):
        """Until an edit, model.gguf is the file byte for byte, even where the header's
        padding is not zeros (a rebuilt header's is); again once the edit is undone."""
        path = os.path.join(self.tmp, "padded.gguf")
        data = bytes(range(256)) * 16
        (start,) = gm.write_gguf(path, [("general.architecture", "llama"),
                                        ("general.name", "pad")],
                                 [("t", [len(data) // 4], 0, data)])
        # the header's own bytes: counts, two string keys, one tensor of one dimension
        end = 24 + sum(8 + len(k) + 4 + 8 + len(v) for k, v in
                       (("general.architecture", "llama"), ("general.name", "pad")))
        end += 8 + 1 + 4 + 8 + 4 + 8
        self.assertLess(end, start)   # there is padding to fill
        with open(path, "r+b") as f:
            f.seek(end)
            f.write(b"\xaa" * (start - end))
        try:
            with self.mount(path) as m:
                self.assertEqual(gm.sha256_file(m.p("model.gguf")), gm.sha256_file(path))
                gm.put(m.p("metadata", "general.name"), b"pad\n")     # the same value
                self.assertEqual(gm.sha256_file(m.p("model.gguf")), gm.sha256_file(path))
                gm.put(m.p("metadata", "general.name"), b"other\n")
                self.assertNotEqual(gm.sha256_file(m.p("model.gguf")), gm.sha256_file(path))
                gm.put(m.p("metadata", "general.name"), b"pad\n")     # undone
                self.assertEqual(gm.sha256_file(m.p("model.gguf")), gm.sha256_file(path))
                self.assertEqual(m.stderr(), "")
        finally:
            os.unlink(path)

    def test_without_edits_erofs(self):
        with gm.Mount(gm.TINY) as m:
            for fn in (lambda: gm.put(m.p("metadata", "general.name"), b"x\n"),
                       lambda: os.unlink(m.p("metadata", "general.name")),
                       lambda: open(m.p("metadata", "new.key"), "w")):
                with self.assertRaises(OSError) as e:
                    fn()
                self.assertEqual(e.exception.errno, errno.EROFS)

    def test_the_issue_example(self):
        template = ("{% for message in messages %}\n" * 2300)[:65536].encode()
        self.assertEqual(len(template), 65536)
        with self.mount() as m:
            md = lambda *k: m.p("metadata", *k)
            gm.put(md("general.name"), b"Llama (fixed)\n")
            gm.put(md("tokenizer.chat_template"), template + b"\n")
            gm.put(md("tokenizer.ggml.eos_token_id"), b" 7 \n")
            os.unlink(md("general.file_type"))
            open(md("my.new.key"), "w").close()
            os.setxattr(md("my.new.key"), "user.gguf.type", b"u32")   # short form: reads back as uint32
            gm.put(md("my.new.key"), b"7\n")
            os.rename(md("general.architecture"), md("general.arch"))
            gm.put(md("tokenizer.ggml.tokens"), b"a\nb\\nc\n\\x01\n")
            open(md("my.big"), "w").close()
            os.setxattr(md("my.big"), "user.gguf.type", b"array[uint32]")
            gm.put(md("my.big"), b"".join(b"%d\n" % i for i in range(150000)))
            self.assertEqual(os.getxattr(md("my.big"), "user.gguf.count"), b"150000")
            gm.put(md("my.big"), b"1\n2\n")

            self.check_edited(m, template)
            doc = edits_of(self.file)
            self.assertEqual(doc["deleted"], ["general.file_type"])
            self.assertEqual(doc["renamed"], {"general.architecture": "general.arch"})
            self.assertEqual(doc["set"]["my.new.key"], {"type": "uint32", "value": 7})
            # model.gguf parses back into the same keys, and tensors byte for byte
            _, err = parses_back(self, m.path)
            self.assertEqual(err, "")
            self.assertNotIn("edit refused", m.stderr())
        with self.mount() as m:  # a remount with FILE has every edit
            self.check_edited(m, template)
            self.assertEqual(m.stderr(), "")

    def check_edited(self, m, template):
        md = lambda *k: m.p("metadata", *k)
        self.assertEqual(meta(m, "general.name"), b"Llama (fixed)\n")
        self.assertEqual(meta(m, "tokenizer.chat_template"), template + b"\n")
        self.assertEqual(meta(m, "tokenizer.ggml.eos_token_id"), b"7\n")
        self.assertEqual(meta(m, "my.new.key"), b"7\n")
        self.assertEqual(os.getxattr(md("my.new.key"), "user.gguf.type"), b"uint32")
        self.assertEqual(meta(m, "tokenizer.ggml.tokens"), b"a\nb\\nc\n\\x01\n")
        self.assertEqual(os.getxattr(md("tokenizer.ggml.tokens"), "user.gguf.count"), b"3")
        self.assertEqual(meta(m, "my.big"), b"1\n2\n")
        self.assertEqual(meta(m, "general.arch"), b"llama\n")
        names = os.listdir(m.p("metadata"))
        self.assertNotIn("general.file_type", names)
        self.assertNotIn("general.architecture", names)
        self.assertEqual(names[-2:], ["my.new.key", "my.big"])  # new keys last
        for k in names:  # sizes exact
            self.assertEqual(os.stat(md(k)).st_size, len(meta(m, k)), k)
        for f in ("gguf.json", "summary.txt", "model.gguf"):
            self.assertEqual(os.stat(m.p(f)).st_size, len(gm.read_file(m.p(f))), f)
        doc = json.loads(gm.read_file(m.p("gguf.json")))
        self.assertEqual(doc["metadata"]["general.name"]["value"], "Llama (fixed)")
        self.assertEqual(doc["metadata"]["my.new.key"], {"type": "uint32", "value": 7,
                                                         "file": "metadata/my.new.key"})
        self.assertEqual(doc["metadata"]["tokenizer.ggml.tokens"]["value"], ["a", "b\nc", "\x01"])
        self.assertIn("name:             Llama (fixed)\n", gm.read_file(m.p("summary.txt")).decode())

    def test_refused_files(self):
        with self.mount(ALLTYPES):
            pass
        self.assertTrue(os.path.exists(self.file))  # a missing FILE is created
        with tempfile.TemporaryDirectory() as d:
            mnt = os.path.join(d, "m")
            os.mkdir(mnt)
            r = gm.run_ggufs(["-f", "-o", "edits=" + self.file, gm.TINY, mnt])
            self.assertEqual(r.returncode, 1)
            err = r.stderr.decode()
            self.assertEqual(err.count("\n"), 1, err)
            self.assertIn("made for another model", err)
            with open(self.file, "w") as f:
                f.write('{"ggufs_edits": 1, "model": {"size": 1, ')
            r = gm.run_ggufs(["-f", "-o", "edits=" + self.file, gm.TINY, mnt])
            self.assertEqual(r.returncode, 1)
            self.assertEqual(r.stderr.decode().count("\n"), 1, r.stderr)
            self.assertFalse(gm.is_mounted(mnt))

    def refused(self, file, want, opts=(), mnt=None):
        """A mount of the bundled model with edits=file: refused, exit 1, one line
        saying want, nothing mounted."""
        with tempfile.TemporaryDirectory() as d:
            mnt = mnt or os.path.join(d, "m")
            os.makedirs(mnt, exist_ok=True)
            r = gm.run_ggufs(["-f", "-o", "edits=" + file] + list(opts) + [gm.TINY, mnt])
            err = r.stderr.decode()
            self.assertEqual(r.returncode, 1, err)
            self.assertEqual(err.count("\n"), 1, err)
            self.assertIn(want, err)
            self.assertFalse(gm.is_mounted(mnt))
            return err

    def test_quick_remount(self):
        """Unmounted and at once mounted again on the same FILE while the old daemon still
        exits holding FILE's lock (slow_close preloaded in it, SLOW_CLOSE_MS): the new
        mount waits for it instead of being refused, and has the old mount's edit; while
        the old one was mounted, the same mount was refused at once."""
        if not SLOW_CLOSE:
            self.skipTest("no slow_close library given")
        env = dict(os.environ)
        os.environ.update(LD_PRELOAD=SLOW_CLOSE, GGUFS_SLOW_CLOSE_FILE=os.path.realpath(self.file),
                          GGUFS_SLOW_CLOSE_MS=str(SLOW_CLOSE_MS),
                          ASAN_OPTIONS=env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
        try:
            old = self.mount().__enter__()
        finally:
            os.environ.clear()
            os.environ.update(env)
        try:
            gm.put(old.p("metadata", "general.name"), b"handed over\n")
            start = time.monotonic()
            self.refused(self.file, "in use by another mount, pid %d (" % old.proc.pid)
            self.assertLess(time.monotonic() - start, 3, "a live holder not refused at once")
            subprocess.run(["fusermount3", "-u", old.path], check=True)
            start = time.monotonic()
            self.assertIsNone(old.proc.poll(), "the old daemon exited before the remount")
            with self.mount() as new:
                waited = time.monotonic() - start
                self.assertEqual(meta(new, "general.name"), b"handed over\n")
                gm.put(new.p("metadata", "general.name"), b"after the remount\n")
                self.assertNotIn("another mount", new.stderr())
            print("remount waited %.2f s for the old daemon (it held FILE %d ms more)"
                  % (waited, SLOW_CLOSE_MS), file=sys.stderr)
            self.assertGreater(waited, SLOW_CLOSE_MS / 2000)   # it did wait for the old one
            self.assertEqual(old.proc.wait(timeout=gm.MOUNT_TIMEOUT), 0, old.stderr())
            self.assertEqual(edits_of(self.file)["set"]["general.name"]["value"],
                             "after the remount")
        finally:
            old.__exit__(None, None, None)

    def test_file_trust(self):
        """FILE is the mount's alone (issue 24 items 4, 5, 7): a second mount of one FILE
        is refused naming the first; FILE and its directory must be the user's own and
        writable by nobody else; no symlink, FIFO or directory; not inside the mount
        point; not on a read-only file system; a killed save's temporary is removed."""
        with self.mount() as m:
            gm.put(m.p("metadata", "general.name"), b"first\n")
            err = self.refused(self.file, "in use by another mount, pid %d (" % m.proc.pid)
            self.assertIn("ggufs", err)
            gm.put(m.p("metadata", "general.name"), b"second\n")   # a new FILE: locked too
            self.refused(self.file, "in use by another mount")
            self.assertEqual(meta(m, "general.name"), b"second\n")
        self.assertEqual(edits_of(self.file)["set"]["general.name"]["value"], "second")
        # a daemon locks FILE before it forks away from its parent, which /proc/locks
        # then names: the refusal names the daemon, which has FILE open
        with tempfile.TemporaryDirectory() as d:
            r = gm.run_ggufs(["-o", "edits=" + self.file, gm.TINY, d])
            self.assertEqual(r.returncode, 0, r.stderr)
            try:
                pids = gm.ggufs_processes(d)
                self.assertEqual(len(pids), 1, pids)
                self.refused(self.file, "in use by another mount, pid %d (" % pids[0])
            finally:
                gm.unmount(d)
        # another user's patch planted in a directory anyone may write to (as /tmp)
        public = gm.public_tmpdir()
        try:
            os.chmod(public, 0o1777)
            planted = os.path.join(public, "fix.json")
            shutil.copy(self.file, planted)
            os.chown(planted, gm.NOBODY, gm.NOBODY)
            self.refused(planted, "writable by group or others (mode 1777)")
            os.chmod(public, 0o755)
            self.refused(planted, "owned by uid 65534")
            os.unlink(planted)
            os.symlink(self.file, planted)
            self.refused(planted, "is a symlink")
            os.unlink(planted)
            os.mkfifo(planted)
            self.refused(planted, "not a regular file")
            os.unlink(planted)
        finally:
            shutil.rmtree(public)
        # FILE in the mount point: the save would go through the mount itself
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o700)
            self.refused(os.path.join(d, "e.json"), "inside the mount point",
                         ["-o", "nonempty"], mnt=d)
            os.mkdir(os.path.join(d, "sub"))
            self.refused(os.path.join(d, "sub", "e.json"), "inside the mount point",
                         ["-o", "nonempty"], mnt=d)
        # what a save killed before its rename left is removed at the next mount
        left = self.file + ".tmp.k1lled"
        with open(left, "w") as f:
            f.write('{"half')
        with self.mount() as m:
            self.assertFalse(os.path.exists(left))
            self.assertEqual(meta(m, "general.name"), b"second\n")
        # a read-only file system: every edit would fail at close
        ro = tempfile.mkdtemp(prefix="ggufs-ro-")
        try:
            if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,mode=0700", "tmpfs", ro],
                              stderr=subprocess.DEVNULL).returncode == 0:
                try:
                    self.refused(os.path.join(ro, "fix.json"), "Read-only file system")
                finally:
                    subprocess.run(["umount", ro], check=True)
        finally:
            os.rmdir(ro)

    def test_shell_redirections(self):
        """What a shell does (issue 24 items 12, 13): "> KEY" closes a first descriptor
        before it writes, which refuses no number's empty value; what can already be known
        not to parse is refused at write(2), so the shell's exit status says so; every
        refusal is counted, kept in user.ggufs.last_error and said on stderr."""
        def sh(cmd):
            return subprocess.run(["bash", "-c", cmd], cwd=m.p("metadata"),
                                  stderr=subprocess.PIPE).returncode

        def refused():
            return int(os.getxattr(m.path, "user.ggufs.edits_refused"))

        with self.mount() as m:
            self.assertEqual(sh("echo 7 > tokenizer.ggml.eos_token_id"), 0)
            self.assertEqual(meta(m, "tokenizer.ggml.eos_token_id"), b"7\n")
            self.assertEqual(refused(), 0)
            self.assertEqual(os.getxattr(m.path, "user.ggufs.last_error"), b"")
            self.assertEqual(edits_of(self.file)["set"]["tokenizer.ggml.eos_token_id"],
                             {"type": "uint32", "value": 7})
            self.assertEqual(sh("touch my.u8 && setfattr -n user.gguf.type -v u8 my.u8"), 0)
            cases = [("echo -1 > llama.block_count", "a negative number for an unsigned type"),
                     ("echo 300 > my.u8", "past the range of uint8 (0 .. 255)"),
                     ("printf '1\\n2\\n' > llama.block_count", "a second value"),
                     ("echo 5 >> llama.block_count", "a second value"),
                     ("echo yes > tokenizer.ggml.add_bos_token", "a byte that no such")]
            block = meta(m, "llama.block_count")
            for n, (cmd, why) in enumerate(cases, 1):
                self.assertNotEqual(sh(cmd), 0, cmd)
                self.assertEqual(refused(), n, cmd)
                self.assertIn(why, os.getxattr(m.path, "user.ggufs.last_error").decode(), cmd)
            self.assertEqual(meta(m, "llama.block_count"), block)
            self.assertEqual(meta(m, "my.u8"), b"0\n")
            # an empty redirection empties the key, before its close returns
            self.assertEqual(sh(": > general.name"), 0)
            self.assertEqual(meta(m, "general.name"), b"\n")
            log = m.stderr()
            for cmd, why in cases:   # said once each (the log counts repeats)
                self.assertIn(why, log)
            self.assertNotIn("''", log)

    def test_sed_in_place(self):
        """sed -i writes a new file and renames it over the key (issue 24 item 10): the
        key keeps its type, place and inode, an array stays an array, and the new file's
        name leaves no trace in metadata/, FILE or model.gguf."""
        with self.mount() as m:
            md = lambda *k: m.p("metadata", *k)
            keys = sorted(os.listdir(md()))
            eos = os.stat(md("tokenizer.ggml.eos_token_id")).st_ino
            tokens = meta(m, "tokenizer.ggml.tokens").split(b"\n")
            for cmd in (["sed", "-i", "s/.*/7/", md("tokenizer.ggml.eos_token_id")],
                        ["sed", "-i", "1s/.*/<UNK>/", md("tokenizer.ggml.tokens")],
                        ["sed", "-i", "s/$/ (fixed)/", md("general.name")]):
                r = subprocess.run(cmd, stderr=subprocess.PIPE)
                self.assertEqual(r.returncode, 0, r.stderr)
            self.vim_save_checks(m, keys, eos, tokens)

    def vim_save_checks(self, m, keys, eos_ino, tokens):
        """After saves of the eos id (7), the first token (<UNK>) and general.name by
        vim's way (or sed -i's): types, places, inodes and values kept; no scratch name anywhere."""
        md = lambda *k: m.p("metadata", *k)
        self.assertEqual(sorted(os.listdir(md())), keys)
        self.assertEqual(meta(m, "tokenizer.ggml.eos_token_id"), b"7\n")
        self.assertEqual(os.getxattr(md("tokenizer.ggml.eos_token_id"), "user.gguf.type"), b"uint32")
        self.assertEqual(os.stat(md("tokenizer.ggml.eos_token_id")).st_ino, eos_ino)
        self.assertEqual(os.getxattr(md("tokenizer.ggml.tokens"), "user.gguf.type"),
                         b"array[string]")
        self.assertEqual(meta(m, "tokenizer.ggml.tokens").split(b"\n"), [b"<UNK>"] + tokens[1:])
        doc = edits_of(self.file)
        self.assertEqual(doc["set"]["tokenizer.ggml.eos_token_id"], {"type": "uint32", "value": 7})
        self.assertEqual(sorted(doc["set"]), ["general.name", "tokenizer.ggml.eos_token_id",
                                              "tokenizer.ggml.tokens"])
        self.assertEqual((doc["deleted"], doc["renamed"]), ([], {}))
        inner, _ = parses_back(self, m.path)
        self.assertEqual(list(inner["metadata"]), keys_in_order(m))
        self.assertEqual(sorted(inner["metadata"]), keys)

    def test_vim_save_syscalls(self):
        """vim's save outside /tmp, call by call (issue 24 items 10, 11): its 4913 probe
        and .KEY.swp are scratch files (listed while they exist, never keys); KEY renamed
        to KEY~ is moved aside (model.gguf keeps it), KEY created and written is that
        key's value by its type, in its place, with its inode; KEY~ removed leaves no
        trace. A save killed after the rename loses nothing: the remount has the key."""
        with self.mount() as m:
            md = lambda *k: m.p("metadata", *k)
            keys = sorted(os.listdir(md()))
            eos_ino = os.stat(md("tokenizer.ggml.eos_token_id")).st_ino
            tokens = meta(m, "tokenizer.ggml.tokens").split(b"\n")
            for key, change in (("tokenizer.ggml.eos_token_id", lambda t: b"7\n"),
                                ("tokenizer.ggml.tokens", lambda t: b"\n".join([b"<UNK>"] + t.split(b"\n")[1:])),
                                ("general.name", lambda t: t[:-1] + b" (fixed)\n")):
                old = meta(m, key)
                swp = os.open(md("." + key + ".swp"), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
                os.pwrite(swp, b"b0VIM 9.0" + bytes(range(256)) * 16, 0)
                os.pwrite(swp, b"\x00\x01tail", 12288)
                self.assertEqual(os.pread(swp, 9, 0), b"b0VIM 9.0")
                self.assertEqual(os.fstat(swp).st_size, 12294)
                probe = os.open(md("4913"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                os.fchown(probe, os.getuid(), os.getgid())
                st = os.stat(md("4913"))
                self.assertEqual((st.st_uid, st.st_mode & 0o777), (os.getuid(), os.stat(md(key)).st_mode & 0o777))
                self.assertIn("4913", os.listdir(md()))
                os.close(probe)
                os.unlink(md("4913"))
                with self.assertRaises(FileNotFoundError):
                    os.unlink(md(key + "~"))
                os.rename(md(key), md(key + "~"))
                self.assertNotIn(key, os.listdir(md()))
                self.assertIn(key + "~", os.listdir(md()))
                self.assertEqual(gm.read_file(md(key + "~")), old)
                self.assertIn(key, json.loads(gm.read_file(m.p("gguf.json")))["metadata"])
                fd = os.open(md(key), os.O_WRONLY | os.O_CREAT, 0o644)
                os.write(fd, change(old))
                os.fsync(fd)
                os.close(fd)
                os.chmod(md(key), 0o644)
                os.unlink(md(key + "~"))
                os.close(swp)
                os.unlink(md("." + key + ".swp"))
            self.vim_save_checks(m, keys, eos_ino, tokens)
            # killed after the rename: the key stays in model.gguf and FILE
            os.rename(md("general.name"), md("general.name~"))
            os.close(os.open(md(".general.name.swp"), os.O_RDWR | os.O_CREAT, 0o600))
        with self.mount() as m:
            self.vim_save_checks(m, keys, eos_ino, tokens)
            self.assertNotIn("edit refused", m.stderr())

    def test_real_vim(self):
        """vim itself (its save outside /tmp: 'backupskip' emptied, as the mount is in
        /tmp) edits a uint32, an array and a string: each keeps its type, place and
        inode, and FILE holds those three edits only."""
        with self.mount() as m:
            md = lambda *k: m.p("metadata", *k)
            keys = sorted(os.listdir(md()))
            eos_ino = os.stat(md("tokenizer.ggml.eos_token_id")).st_ino
            tokens = meta(m, "tokenizer.ggml.tokens").split(b"\n")
            for key, cmd in (("tokenizer.ggml.eos_token_id", "%s/.*/7/"),
                             ("tokenizer.ggml.tokens", "1s/.*/<UNK>/"),
                             ("general.name", "s/$/ (fixed)/")):
                r = vim(md(key), cmd)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.vim_save_checks(m, keys, eos_ino, tokens)
            self.assertEqual(meta(m, "general.name")[-8:], b"(fixed)\n")
            self.assertNotIn("edit refused", m.stderr())

    def test_refused_saves(self):
        """A save that does not parse (issue 38 item 6): the write(2) that makes the text
        unparsable is EINVAL, an array's whole line included (a number's own line, a
        string's bad escape), so cp, a shell or a program sees the reason at once, and
        the close fails too; vim (-es), whose save renames KEY aside and makes a new KEY,
        and on the refusal removes it and renames the old one back, and emacs, which
        leaves its backup, fail with the key as it was: value, type, place and inode
        (vim's way back made a number or array key a string before); FILE holds no
        edit."""
        with self.mount() as m:
            md = lambda *k: m.p("metadata", *k)
            keys = sorted(os.listdir(md()))
            order = keys_in_order(m)
            before = {k: (meta(m, k), os.getxattr(md(k), "user.gguf.type"), os.stat(md(k)).st_ino)
                      for k in keys}
            # plain writes: the one holding the bad line is refused, not the close alone
            for key, data, bad_at in (("tokenizer.ggml.token_type", b"1\n2\nabc\n", 2),
                                      ("tokenizer.ggml.scores", b"0.5\n-0\n1.5.5\n", 2),
                                      ("tokenizer.ggml.tokens", b"a\n\\q\n", 1),
                                      ("llama.context_length", b"x", 0)):
                fd = os.open(md(key), os.O_WRONLY | os.O_TRUNC)
                try:
                    for n, line in enumerate(data.splitlines(keepends=True)):
                        if n < bad_at:
                            self.assertEqual(os.write(fd, line), len(line), key)
                        else:
                            with self.assertRaises(OSError, msg=key) as e:
                                os.write(fd, line)
                            self.assertEqual(e.exception.errno, errno.EINVAL, key)
                            break
                finally:
                    with self.assertRaises(OSError, msg=key) as e:
                        os.close(fd)
                    self.assertEqual(e.exception.errno, errno.EINVAL, key)
                self.assertIn("line %d" % (bad_at + 1) if key != "llama.context_length"
                              else "no longer be a uint32",
                              os.getxattr(m.path, "user.ggufs.last_error").decode(), key)
            # a copy of the file as it shows, back in small pieces: no refusal
            shown = meta(m, "tokenizer.ggml.scores")
            fd = os.open(md("tokenizer.ggml.scores"), os.O_WRONLY | os.O_TRUNC)
            for at in range(0, len(shown), 1000):
                os.write(fd, shown[at:at + 1000])
            os.close(fd)
            # editors, their saves outside /tmp (the mount is in it)
            for key, cmd in (("tokenizer.ggml.token_type", "3s/.*/abc/"),
                             ("llama.context_length", "%s/.*/abc/"),
                             ("tokenizer.ggml.tokens", "2s/.*/a\\\\q/")):
                r = vim(md(key), cmd)
                self.assertNotEqual(r.returncode, 0, key)
            r = subprocess.run(["emacs", "-Q", "--batch",
                                "--eval", "(setq backup-enable-predicate (lambda (f) t))",
                                md("tokenizer.ggml.token_type"),
                                "--eval", '(progn (goto-char (point-min)) (insert "abc\n"))',
                                "-f", "save-buffer"],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(b"Invalid argument", r.stderr)
            # emacs leaves its backup (a scratch file with the old text), as a save does
            self.assertEqual(gm.read_file(md("tokenizer.ggml.token_type~")),
                             before["tokenizer.ggml.token_type"][0])
            os.unlink(md("tokenizer.ggml.token_type~"))
            self.assertEqual(sorted(os.listdir(md())), keys)
            self.assertEqual(keys_in_order(m), order)
            for k in keys:
                self.assertEqual((meta(m, k), os.getxattr(md(k), "user.gguf.type"),
                                  os.stat(md(k)).st_ino), before[k], k)
            doc = edits_of(self.file)
            self.assertEqual((doc["set"], doc["deleted"], doc["renamed"]), ({}, [], {}))

    def test_real_emacs(self):
        """emacs itself (batch; backups enabled in /tmp, where the mount is) edits a
        uint32, an array and a string: its first save renames KEY to KEY~ and writes a
        new KEY, which keeps the key's type, place and inode; its lock file (.#KEY, a
        symlink) is refused and emacs saves anyway; KEY~ stays a scratch file with the
        old text until unmount, and FILE holds those three edits only."""
        with self.mount() as m:
            md = lambda *k: m.p("metadata", *k)
            keys = sorted(os.listdir(md()))
            eos_ino = os.stat(md("tokenizer.ggml.eos_token_id")).st_ino
            tokens = meta(m, "tokenizer.ggml.tokens").split(b"\n")
            old_name = meta(m, "general.name")
            for key, edit in (("tokenizer.ggml.eos_token_id", '(progn (erase-buffer) (insert "7\\n"))'),
                              ("tokenizer.ggml.tokens", "(progn (goto-char (point-min)) (kill-line)"
                                                        ' (insert "<UNK>"))'),
                              ("general.name", '(progn (goto-char (point-min)) (end-of-line)'
                                               ' (insert " (fixed)"))')):
                r = subprocess.run(["emacs", "-Q", "--batch",
                                    "--eval", "(setq backup-enable-predicate (lambda (f) t))",
                                    md(key), "--eval", edit, "-f", "save-buffer"],
                                   stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn(key + "~", os.listdir(md()))
            self.assertEqual(gm.read_file(md("general.name~")), old_name)
            backups = sorted(k for k in os.listdir(md()) if k.endswith("~"))
            self.assertEqual(backups, ["general.name~", "tokenizer.ggml.eos_token_id~",
                                       "tokenizer.ggml.tokens~"])
            for b in backups:   # the user's clean-up; they would go at unmount anyway
                os.unlink(md(b))
            self.vim_save_checks(m, keys, eos_ino, tokens)
            self.assertEqual(meta(m, "general.name"), old_name[:-1] + b" (fixed)\n")
            self.assertNotIn("edit refused", m.stderr())

    def test_scratch_files(self):
        """Names of editors' and tools' temporaries (a leading '.', a trailing '~', #...#,
        4913) are scratch files: written, read, truncated, renamed among themselves, gone
        at unmount, never in FILE; one renamed over a key sets the key (rsync's
        .KEY.XXXXXX), to a new name makes a string key; a key moved aside whose scratch
        file is removed is deleted; keys with such names show escaped (%2E, %7E)."""
        with self.mount() as m:
            md = lambda *k: m.p("metadata", *k)
            keys = sorted(os.listdir(md()))
            gm.put(md("#general.name#"), b"auto-save\n", os.O_WRONLY | os.O_CREAT)
            os.truncate(md("#general.name#"), 4)
            self.assertEqual(gm.read_file(md("#general.name#")), b"auto")
            os.rename(md("#general.name#"), md(".general.name.un~"))
            self.assertEqual(sorted(os.listdir(md())), sorted(keys + [".general.name.un~"]))
            self.assertEqual(os.listxattr(md(".general.name.un~")), [])
            gm.put(md(".eos.XXXXXX"), b"5\n", os.O_WRONLY | os.O_CREAT)
            os.rename(md(".eos.XXXXXX"), md("tokenizer.ggml.eos_token_id"))
            self.assertEqual(meta(m, "tokenizer.ggml.eos_token_id"), b"5\n")
            gm.put(md(".eos.YYYYYY"), b"five\n", os.O_WRONLY | os.O_CREAT)
            with self.assertRaises(OSError) as e:
                os.rename(md(".eos.YYYYYY"), md("tokenizer.ggml.eos_token_id"))
            self.assertEqual(e.exception.errno, errno.EINVAL)
            os.rename(md(".eos.YYYYYY"), md("my.new.key"))
            self.assertEqual(meta(m, "my.new.key"), b"five\n")
            os.rename(md("llama.block_count"), md("llama.block_count~"))
            os.unlink(md("llama.block_count~"))
            gm.put(md("%2Edot%7E"), b"escaped\n", os.O_WRONLY | os.O_CREAT)
            self.assertIn("%2Edot%7E", os.listdir(md()))
            with self.assertRaises(OSError) as e:
                os.setxattr(m.p("tensors", os.listdir(m.p("tensors"))[0]), "user.gguf.type", b"u8")
            self.assertEqual(e.exception.errno, errno.EROFS)
            doc = edits_of(self.file)
            self.assertEqual(sorted(doc["set"]), [".dot~", "my.new.key", "tokenizer.ggml.eos_token_id"])
            self.assertEqual(doc["deleted"], ["llama.block_count"])
            self.assertNotIn("un~", json.dumps(doc))
        with self.mount() as m:
            names = os.listdir(m.p("metadata"))
            self.assertNotIn(".general.name.un~", names)
            self.assertIn("%2Edot%7E", names)

    def test_times_change(self):
        """An edit changes the mtime and ctime of the key's file, metadata/, gguf.json,
        summary.txt and model.gguf (issue 24 item 14: rsync -a kept a stale model.gguf
        after a same-size edit); other keys and files keep the model file's times; a
        remount gives the edited files FILE's time."""
        model_mtime = os.stat(gm.TINY).st_mtime_ns
        with self.mount() as m:
            md = lambda *k: m.p("metadata", *k)
            edited = [md("tokenizer.ggml.eos_token_id"), md(), m.p("gguf.json"),
                      m.p("summary.txt"), m.p("model.gguf")]
            kept = [md("general.name"), m.p("tensors", os.listdir(m.p("tensors"))[0]), m.p("stats.tsv")]
            for p in edited + kept:
                self.assertEqual(os.stat(p).st_mtime_ns, model_mtime, p)
            size = os.stat(m.p("model.gguf")).st_size
            before = time.time_ns()
            time.sleep(0.02)
            gm.put(md("tokenizer.ggml.eos_token_id"), b"7\n")
            after = time.time_ns()
            self.assertEqual(os.stat(m.p("model.gguf")).st_size, size)   # a same-size edit
            times = set()
            for p in edited:
                st = os.stat(p)
                self.assertTrue(before < st.st_mtime_ns <= after, p)
                self.assertEqual(st.st_ctime_ns, st.st_mtime_ns, p)
                times.add(st.st_mtime_ns)
            self.assertEqual(len(times), 1)
            for p in kept:
                self.assertEqual(os.stat(p).st_mtime_ns, model_mtime, p)
            time.sleep(0.02)
            gm.put(md("general.name"), b"renamed\n")   # the first key keeps its time
            self.assertEqual(os.stat(md("tokenizer.ggml.eos_token_id")).st_mtime_ns, times.pop())
            self.assertGreater(os.stat(md("general.name")).st_mtime_ns, after)
        file_mtime = os.stat(self.file).st_mtime_ns
        with self.mount() as m:
            for p in (m.p("metadata", "tokenizer.ggml.eos_token_id"), m.p("metadata", "general.name"),
                      m.p("model.gguf"), m.p("gguf.json")):
                self.assertEqual(os.stat(p).st_mtime_ns, file_mtime, p)
            self.assertEqual(os.stat(m.p("metadata", "llama.block_count")).st_mtime_ns, model_mtime)

    def test_install_over_key(self):
        """install(1) removes its target, then creates it (issue 24 item 10: a create of
        a name that was a key a moment ago): the key comes back in its place, type and
        inode, its value the new text parsed by its type; FILE has a set, no delete."""
        with self.mount() as m:
            md = lambda *k: m.p("metadata", *k)
            order = keys_in_order(m)
            eos = os.stat(md("tokenizer.ggml.eos_token_id")).st_ino
            src = os.path.join(self.tmp, "eos.txt")
            with open(src, "w") as f:
                f.write("9\n")
            r = subprocess.run(["install", "-m", "644", src, md("tokenizer.ggml.eos_token_id")],
                               stderr=subprocess.PIPE)
            os.unlink(src)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(meta(m, "tokenizer.ggml.eos_token_id"), b"9\n")
            self.assertEqual(os.getxattr(md("tokenizer.ggml.eos_token_id"), "user.gguf.type"), b"uint32")
            self.assertEqual(os.stat(md("tokenizer.ggml.eos_token_id")).st_ino, eos)
            # the same call by call, for an array
            tokens = meta(m, "tokenizer.ggml.tokens").split(b"\n")
            os.unlink(md("tokenizer.ggml.tokens"))
            gm.put(md("tokenizer.ggml.tokens"), b"\n".join([b"<X>"] + tokens[1:]),
                os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            self.assertEqual(os.getxattr(md("tokenizer.ggml.tokens"), "user.gguf.type"), b"array[string]")
            self.assertEqual(keys_in_order(m), order)
            doc = edits_of(self.file)
            self.assertEqual(doc["deleted"], [])
            self.assertEqual(doc["set"]["tokenizer.ggml.eos_token_id"], {"type": "uint32", "value": 9})
            self.assertEqual(sorted(doc["set"]), ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.tokens"])

    def test_chmod_chown_accepted(self):
        """chmod, chown and utimes of metadata files succeed and change nothing (issue 24
        item 15), so install, cp -a and rsync into metadata/ exit 0; elsewhere EPERM."""
        with self.mount() as m:
            k = m.p("metadata", "general.name")
            before = os.stat(k)
            os.chmod(k, 0o600)
            os.chown(k, os.getuid(), os.getgid())
            os.utime(k, (1, 1))
            after = os.stat(k)
            self.assertEqual((after.st_mode, after.st_uid), (before.st_mode, before.st_uid))
            src = os.path.join(self.tmp, "v.txt")
            with open(src, "w") as f:
                f.write("installed\n")
            r = subprocess.run(["install", "-m", "600", src, m.p("metadata", "my.installed")],
                               stderr=subprocess.PIPE)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(meta(m, "my.installed"), b"installed\n")
            os.unlink(src)
            with self.assertRaises(OSError) as e:
                os.chmod(m.p("gguf.json"), 0o600)
            self.assertEqual(e.exception.errno, errno.EPERM)

    def test_refusals(self):
        with self.mount() as m:
            md = lambda *k: m.p("metadata", *k)
            cases = [
                (lambda: gm.put(md("general.alignment"), b"64\n", os.O_WRONLY | os.O_CREAT), errno.EPERM),
                (lambda: open(md("split.count"), "w"), errno.EPERM),
                (lambda: open(md("bad%2"), "w"), errno.EINVAL),
                # longer than any key's file name (217 bytes): refused before decoding
                (lambda: open(md("A" * 255), "w"), errno.ENAMETOOLONG),
                (lambda: open(md("%2F" * 85), "w"), errno.ENAMETOOLONG),
                (lambda: os.rename(md("general.name"), md("B" * 255)), errno.ENAMETOOLONG),
                (lambda: gm.put(md("llama.block_count"), b"x"), errno.EINVAL),        # at write
                (lambda: gm.put(md("llama.block_count"), b"1 2\n"), errno.EINVAL),    # at close
                (lambda: gm.put(md("llama.block_count"), b"99999999999\n"), errno.EINVAL),
                (lambda: gm.put(md("tokenizer.ggml.add_bos_token"), b"yes\n"), errno.EINVAL),
                (lambda: os.setxattr(md("general.name"), "user.gguf.type", b"uint32"), errno.EINVAL),
                (lambda: os.setxattr(md("general.name"), "user.gguf.type", b"int3"), errno.EINVAL),
                (lambda: gm.put(m.p("gguf.json"), b"{}"), errno.EROFS),
                (lambda: os.unlink(m.p("model.gguf")), errno.EROFS),
            ]
            before = {k: meta(m, k) for k in os.listdir(m.p("metadata"))}
            for fn, want in cases:
                with self.assertRaises(OSError) as e:
                    fn()
                self.assertEqual(e.exception.errno, want)
            self.assertEqual({k: meta(m, k) for k in os.listdir(m.p("metadata"))}, before)
            self.assertEqual(edits_of(self.file)["set"], {})
            log = m.stderr()
            self.assertIn("general.alignment would move every tensor", log)
            self.assertIn("llama.block_count", log)

    def test_offsets_sparse_truncate(self):
        with self.mount() as m:
            k = m.p("metadata", "general.name")
            with open(k, "r+b") as f:  # a write at an offset changes those bytes only
                f.seek(3)
                f.write(b"XY")
            name = meta(m, "general.name")
            self.assertEqual(name[3:5], b"XY")
            self.assertEqual(len(name), os.stat(k).st_size)
            fd = os.open(k, os.O_WRONLY | os.O_TRUNC)  # sparse: a hole of zeros
            os.pwrite(fd, b"end\n", 5)
            os.close(fd)
            self.assertEqual(meta(m, "general.name"), b"\0" * 5 + b"end\n")
            os.truncate(k, 3)  # odd sizes: the text cut, with no final newline
            self.assertEqual(meta(m, "general.name"), b"\0\0\0\n")
            os.truncate(k, 7)  # "\0\0\0\n" and 3 zeros: no final newline to drop
            self.assertEqual(meta(m, "general.name"), b"\0\0\0\n\0\0\0\n")
            self.assertEqual(os.stat(k).st_size, 8)
            os.truncate(m.p("metadata", "llama.block_count"), 1)  # "2\n" cut to "2"
            self.assertEqual(meta(m, "llama.block_count"), b"2\n")
            with self.assertRaises(OSError) as e:
                os.truncate(m.p("metadata", "llama.block_count"), 0)  # no number
            self.assertEqual(e.exception.errno, errno.EINVAL)
            self.assertEqual(meta(m, "llama.block_count"), b"2\n")

    def test_two_writers_last_close_wins(self):
        with self.mount() as m:
            k = m.p("metadata", "general.name")
            a = os.open(k, os.O_WRONLY | os.O_TRUNC)
            b = os.open(k, os.O_WRONLY | os.O_TRUNC)
            os.write(a, b"first writer\n")
            os.write(b, b"second\n")
            os.close(b)
            self.assertEqual(meta(m, "general.name"), b"second\n")
            os.close(a)
            self.assertEqual(meta(m, "general.name"), b"first writer\n")

    def test_open_reader_sees_old_state(self):
        with self.mount() as m:
            fd = os.open(m.p("gguf.json"), os.O_RDONLY | os.O_DIRECT)
            old_size = os.fstat(fd).st_size
            gm.put(m.p("metadata", "general.name"), b"x" * 5000 + b"\n")
            got = b""
            while True:
                b = os.pread(fd, 1 << 16, len(got))
                if not b:
                    break
                got += b
            os.close(fd)
            self.assertEqual(len(got), old_size)
            self.assertNotIn(b"xxxxx", got)
            json.loads(got)
            new = gm.read_file(m.p("gguf.json"))
            self.assertIn(b"x" * 5000, new)

    def test_other_user_cannot_write(self):
        with self.mount(opts=["-o", "allow_other"]) as m:
            k = m.p("metadata", "general.name")
            self.assertEqual(gm.errno_as_nobody(gm.read_file, k), 0)
            self.assertEqual(gm.errno_as_nobody(gm.put, k, b"evil\n"), errno.EACCES)
            self.assertEqual(gm.errno_as_nobody(os.unlink, k), errno.EACCES)
            self.assertEqual(gm.errno_as_nobody(open, m.p("metadata", "n"), "w"), errno.EACCES)
            gm.put(k, b"owner\n")
            self.assertEqual(meta(m, "general.name"), b"owner\n")

    def check_model_offsets(self, m):
        """gguf.json's model_data_offset and each tensor's model_offset (and its
        user.gguf.model_offset) say where model.gguf holds the tensor's bytes."""
        doc = json.loads(gm.read_file(m.p("gguf.json")))
        with open(m.p("model.gguf"), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            first = min(t["model_offset"] for t in doc["tensors"])
            self.assertEqual(first, doc["model_data_offset"])
            for t in doc["tensors"]:
                off, n = t["model_offset"], min(t["size"], 4096)
                self.assertEqual(int(os.getxattr(m.p(t["file"]), "user.gguf.model_offset")), off)
                self.assertLessEqual(off + t["size"], size)
                with open(m.p(t["file"]), "rb") as raw:
                    self.assertEqual(os.pread(f.fileno(), n, off), raw.read(n), t["name"])
        return doc

    def test_model_offsets(self):
        """model.gguf's own offsets (issue 24 item 16), current across edits: an edit
        that grows the header moves them; offset and data_offset stay the file's; a
        merged split model publishes them too."""
        with self.mount() as m:
            doc = self.check_model_offsets(m)
            self.assertEqual(doc["model_data_offset"], doc["data_offset"])
            gm.put(m.p("metadata", "tokenizer.chat_template"), b"x" * 5000 + b"\n")
            doc2 = self.check_model_offsets(m)
            self.assertEqual(doc2["data_offset"], doc["data_offset"])
            self.assertGreater(doc2["model_data_offset"], doc["data_offset"])
            self.assertEqual([t["offset"] for t in doc2["tensors"]], [t["offset"] for t in doc["tensors"]])
        shards = split_gguf(gm.TINY, self.tmp, "tiny", 3)
        with self.mount(shards[0]) as m:
            doc = self.check_model_offsets(m)
            self.assertNotEqual([t["offset"] for t in doc["tensors"]],
                                [t["model_offset"] for t in doc["tensors"]])

    def test_key_and_writer_bounds(self):
        """What one key may take is 64 MiB of text (issue 24 item 8): past it a write, a
        truncate, a rename of a scratch file over a key are EFBIG at once; a value that
        would take more than 128 MiB is EFBIG at close; at most 16 keys are open for
        writing at once (ENFILE past that, the others unharmed)."""
        with self.mount() as m:
            k = m.p("metadata", "general.name")
            fd = os.open(k, os.O_WRONLY)
            try:
                with self.assertRaises(OSError) as e:
                    os.pwrite(fd, b"x", 64 << 20)
                self.assertEqual(e.exception.errno, errno.EFBIG)
            finally:   # a refused write fails its close too (test_edits_closes.py)
                with self.assertRaises(OSError) as e:
                    os.close(fd)
                self.assertEqual(e.exception.errno, errno.EFBIG)
            fd = os.open(k, os.O_WRONLY)
            try:
                os.pwrite(fd, b"y", (64 << 20) - 1 - 8)   # up to the bound is fine
                os.ftruncate(fd, 5)
            finally:
                os.close(fd)
            with self.assertRaises(OSError) as e:
                os.truncate(k, (64 << 20) + 1)
            self.assertEqual(e.exception.errno, errno.EFBIG)
            fd = os.open(m.p("metadata", ".big.XXXXXX"), os.O_WRONLY | os.O_CREAT)
            os.pwrite(fd, b"z", 64 << 20)
            os.close(fd)
            with self.assertRaises(OSError) as e:
                os.rename(m.p("metadata", ".big.XXXXXX"), k)
            self.assertEqual(e.exception.errno, errno.EFBIG)
            os.unlink(m.p("metadata", ".big.XXXXXX"))
            self.assertEqual(meta(m, "general.name")[:5], b"tinyl")
            # 17 Mi empty lines into an array of strings: 136 MB of empty strings, past
            # the 128 MiB a value may take, refused before it is parsed
            tokens = meta(m, "tokenizer.ggml.tokens")
            with self.assertRaises(OSError) as e:
                gm.put(m.p("metadata", "tokenizer.ggml.tokens"), b"\n" * (17 << 20))
            self.assertEqual(e.exception.errno, errno.EFBIG)
            self.assertEqual(meta(m, "tokenizer.ggml.tokens"), tokens)
            keys = sorted(os.listdir(m.p("metadata")))[:17]
            fds = [os.open(m.p("metadata", key), os.O_WRONLY) for key in keys[:16]]
            try:
                with self.assertRaises(OSError) as e:
                    os.open(m.p("metadata", keys[16]), os.O_WRONLY)
                self.assertEqual(e.exception.errno, errno.ENFILE)
                with self.assertRaises(OSError) as e:
                    os.open(m.p("metadata", "my.new"), os.O_WRONLY | os.O_CREAT)
                self.assertEqual(e.exception.errno, errno.ENFILE)
                self.assertNotIn("my.new", os.listdir(m.p("metadata")))
                os.close(fds.pop())
                os.close(os.open(m.p("metadata", keys[16]), os.O_WRONLY))
            finally:
                for fd in fds:
                    os.close(fd)
            self.assertIn("too many keys open for writing", m.stderr())

    def test_split_model(self):
        """A split model's edits apply to its merged model.gguf; split.* stay EPERM."""
        shards = split_gguf(gm.TINY, self.tmp, "tiny", 3)
        with self.mount(shards[1]) as m:
            gm.put(m.p("metadata", "general.name"), b"merged and fixed\n")
            with self.assertRaises(OSError) as e:
                gm.put(m.p("metadata", "split.count"), b"1\n")
            self.assertEqual(e.exception.errno, errno.EPERM)
            self.assertIn("(the 3 shards merged into one GGUF, with the metadata edits)",
                          gm.read_file(m.p("summary.txt")).decode())
            doc, _ = parses_back(self, m.path)
            self.assertEqual(doc["metadata"]["general.name"]["value"], "merged and fixed")
            self.assertNotIn("split.count", doc["metadata"])
        with self.mount(shards[0]) as m:  # the same model, from another shard
            self.assertEqual(meta(m, "general.name"), b"merged and fixed\n")

    def test_kill_during_edits(self):
        d = gm.public_tmpdir()
        mnt = os.path.join(d, "m")
        os.mkdir(mnt)
        proc = subprocess.Popen([gm.GGUFS, "-f", "-o", "edits=" + self.file, gm.TINY, mnt],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + gm.MOUNT_TIMEOUT
            while not gm.is_mounted(mnt) and time.monotonic() < deadline:
                time.sleep(0.02)
            done = []
            start = time.monotonic()
            for i in range(400):
                if i == 40 or time.monotonic() - start > 5:
                    proc.kill()  # SIGKILL, in the middle of the loop
                try:
                    gm.put(os.path.join(mnt, "metadata", "general.name"), b"v%d\n" % i)
                    done.append(i)
                except OSError:
                    break
        finally:
            proc.kill()
            proc.wait()
            gm.unmount(mnt)
            os.rmdir(mnt)
            os.rmdir(d)
        self.assertTrue(done)
        doc = edits_of(self.file)  # parses
        value = doc["set"]["general.name"]["value"]
        # the last close that returned, or the one under way when the daemon died
        self.assertIn(int(value[1:]), (done[-1], done[-1] + 1))
        with self.mount() as m:
            self.assertEqual(meta(m, "general.name"), value.encode() + b"\n")


if __name__ == "__main__":
    if len(sys.argv) > 2 and os.path.isfile(sys.argv[2]):
        SLOW_CLOSE = os.path.abspath(sys.argv.pop(2))
    gm.main()
