"""A local library that other people write to (issue 37, local folders): a name swapped
after its lookup (for a symlink to a root-only file, or for a FIFO) is never opened as
the daemon's user; symlink loops neither hang models.tsv nor grow it; with allow_other
no symlink leads out of the library's root; a model rewritten in place is not rebuilt
under the numbers of its old version; and the slots of versions gone are freed, their
numbers never given again. Issue 43: a split model's later shards are checked as its
first file is (never a root-only file's bytes, never a FIFO or device opened), and the
first file is opened once, through the descriptor checked, so that an error line never
quotes another file's bytes; and browsing a symlink DAG (2^21 paths) gives its memory
back once the kernel forgets the paths.

The other user is played by forked children that setuid to nobody (65534); files are
swapped with renameat2(RENAME_EXCHANGE), as an attacker would. Every loop is bounded in
count and in time."""
import ctypes
import errno
import os
import platform
import signal
import struct
import subprocess
import threading
import time

import ggufs_mount as gm

NOBODY = gm.NOBODY
SECRET = b"TOPSECRET\n"

_libc = ctypes.CDLL(None, use_errno=True)


def exchange(a, b):
    """renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE): a and b trade places."""
    at_fdcwd, rename_exchange = -100, 2
    args = (at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    if hasattr(_libc, "renameat2"):
        r = _libc.renameat2(*args)
    else:  # glibc before 2.28: the system call itself
        r = _libc.syscall({"x86_64": 316, "aarch64": 276}[platform.machine()], *args)
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), a)


def as_nobody(fn, limit=1 << 16):
    """fn() run in a forked child as nobody: ("ok", the bytes it returned) or ("errno",
    the errno of the OSError it raised); anything else fails the test."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            gm.drop_to_nobody()
            out = b"ok:" + bytes(fn())[:limit]
        except OSError as e:
            out = b"errno:%d" % (e.errno or 0)
        except BaseException as e:  # noqa: B902 - reported to the parent
            out = b"fail:" + repr(e).encode()
        try:
            os.write(w, out)
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while True:
        c = os.read(r, 1 << 16)
        if not c:
            break
        chunks.append(c)
    os.close(r)
    os.waitpid(pid, 0)
    kind, _, value = b"".join(chunks).partition(b":")
    if kind == b"errno":
        return "errno", int(value)
    if kind != b"ok":
        raise AssertionError("the child failed: %r" % value)
    return "ok", value


IN_OPEN = 0x20


def watch_opens(path):
    """An inotify descriptor that sees every open of path (IN_OPEN: an O_PATH lookup is
    none), made before the test acts."""
    fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0 or _libc.inotify_add_watch(fd, os.fsencode(path), IN_OPEN) < 0:
        raise OSError(ctypes.get_errno(), "inotify", path)
    return fd


def opens_seen(fd):
    """How many opens inotify descriptor fd saw (then closed)."""
    n = 0
    try:
        while True:
            try:
                buf = os.read(fd, 4096)
            except BlockingIOError:
                break
            at = 0
            while at < len(buf):
                _, mask, _, length = struct.unpack_from("iIII", buf, at)
                n += bool(mask & IN_OPEN)
                at += 16 + length
    finally:
        os.close(fd)
    return n


def secret_hex(data):
    """The first four bytes of data as a parse error quotes them ("54 4f 50 53")."""
    return " ".join("%02x" % b for b in data[:4])


def read_fd_path(fd):
    """The bytes of the file that O_PATH descriptor fd holds, opened anew through /proc
    (what the kernel checked at its lookup is what it checks at this open)."""
    with open("/proc/self/fd/%d" % fd, "rb") as f:
        return f.read()


class LocalTrust(gm.ScratchCase):
    prefix = "ggufs-trust-"
    public = True            # nobody reaches the folder, to swap names in it
    folders = {"src": "models"}

    def setUp(self):
        super().setUp()
        os.chown(self.src, NOBODY, NOBODY)   # the folder is the other user's to write
        # root's own file, beside the folder: nobody cannot read it
        self.secret = os.path.join(self.tmp, "secret")
        with open(self.secret, "wb") as f:
            f.write(SECRET)
        os.chmod(self.secret, 0o600)

    def put(self, rel, data, owner=NOBODY):
        p = os.path.join(self.src, rel)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, 0o644)
        os.chown(p, owner, owner)
        return p

    def put_shard(self, rel, no, count, owner=NOBODY, data=b"\0" * 16, name=None):
        """Shard no (from 1) of count as src/rel (or rel when absolute), one f32 tensor
        of data (16 bytes) named name (t<no>), owner's, mode 0644."""
        p = rel if os.path.isabs(rel) else os.path.join(self.src, rel)
        kvs = [("general.architecture", "t")] if no == 1 else []
        kvs += [("split.no", no - 1), ("split.count", count), ("split.tensors.count", count)]
        gm.write_gguf(p, kvs, [(name or "t%d" % no, [4], gm.GGML_F32, data)])
        os.chmod(p, 0o644)
        os.chown(p, owner, owner)
        return p

    def link(self, target, rel):
        """A symlink src/rel -> target, nobody's (as nobody would make it)."""
        p = os.path.join(self.src, rel)
        os.symlink(target, p)
        os.lchown(p, NOBODY, NOBODY)
        return p

    def error_of(self, m, model):
        """The text of model's error file, read as nobody within 20 s (a daemon waiting in
        a FIFO would hold the read): ("ok", bytes) or ("errno", n)."""
        out = []
        t = threading.Thread(target=lambda: out.append(
            as_nobody(lambda: gm.read_file(m.p(model, "error")))), daemon=True)
        t.start()
        t.join(20)
        self.assertFalse(t.is_alive(), "the error of %s took more than 20 s" % model)
        return out[0]

    def test_later_shard_leading_to_a_root_only_file(self):
        """Issue 43, item 1: shard 2 of nobody's model a symlink to root's own GGUF shard
        (outside the library, or inside it) or to a root-only file that is no GGUF (as
        /etc/shadow): nobody cannot read the secret tensor through the mount, and the
        model's error names shard 2 and why, never the file's bytes (the old daemon
        served the tensor, and quoted the file's first bytes)."""
        secret = b"TOPSECRET-TENSOR"
        shadow = b"root:$6$salt$hash:19000:0:99999:7:::\n"
        # p: shard 2 outside the library; v: inside it; w: a root-only file, no GGUF
        self.put_shard("p-00001-of-00002.gguf", 1, 2)
        outside = self.put_shard(os.path.join(self.tmp, "root-shard.gguf"), 2, 2, owner=0,
                                 data=secret, name="secret.weight")
        os.chmod(outside, 0o600)
        self.link(outside, "p-00002-of-00002.gguf")
        self.put_shard("v-00001-of-00002.gguf", 1, 2)
        vault = self.put_shard("vault.bin", 2, 2, owner=0, data=secret, name="secret.weight")
        os.chmod(vault, 0o600)
        self.link("vault.bin", "v-00002-of-00002.gguf")
        self.put_shard("w-00001-of-00002.gguf", 1, 2)
        shadow_path = os.path.join(self.src, "shadow")
        with open(shadow_path, "wb") as f:
            f.write(shadow)
        os.chmod(shadow_path, 0o600)
        self.link("shadow", "w-00002-of-00002.gguf")
        self.assertEqual(as_nobody(lambda: gm.read_file(outside)), ("errno", errno.EACCES))
        with gm.Mount(self.src, ["-o", "allow_other"]) as m:
            for model in ("p", "v"):
                self.assertEqual(
                    as_nobody(lambda: gm.read_file(m.p(model, "tensors", "secret.weight"))),
                    ("errno", errno.ENOENT), model)
            why = {
                "p": "it leads out of the library's folder",
                "v": "not read, as other users read the library: owned by uid 0, not by "
                     "uid 65534 as the first file is",
                "w": "not read, as other users read the library: owned by uid 0, not by "
                     "uid 65534 as the first file is",
            }
            for model, reason in why.items():
                kind, text = self.error_of(m, model)
                self.assertEqual(kind, "ok", (model, text))
                shard = os.path.join(self.src, "%s-00002-of-00002.gguf" % model)
                self.assertEqual(text.decode(), "ggufs: %s: %s\n" % (shard, reason))
                for data in (secret, shadow):
                    self.assertNotIn(secret_hex(data).encode(), text)
                    self.assertNotIn(data[:4], text)

    def test_later_shard_fifo_or_device_never_opened(self):
        """Issue 43, item 1: shard 2 a FIFO, a device node, or a symlink to /dev/zero: the
        daemon never opens it (inotify sees no open of the FIFO or the node: the old
        daemon opened both, as root), the build does not wait, and the error says what
        the file is."""
        fifo = os.path.join(self.src, "f-00002-of-00002.gguf")
        self.put_shard("f-00001-of-00002.gguf", 1, 2)
        os.mkfifo(fifo)
        os.chown(fifo, NOBODY, NOBODY)
        self.put_shard("z-00001-of-00002.gguf", 1, 2)
        self.link("/dev/zero", "z-00002-of-00002.gguf")
        node = os.path.join(self.src, "d-00002-of-00002.gguf")
        self.put_shard("d-00001-of-00002.gguf", 1, 2)
        try:   # /dev/zero's numbers, in the library's folder
            os.mknod(node, 0o666 | 0o020000, os.makedev(1, 5))
        except OSError:
            node = None   # no mknod here (a container without CAP_MKNOD)
        watches = {"f": watch_opens(fifo)}
        if node:
            watches["d"] = watch_opens(node)
        expect = {
            "f": fifo + ": not a regular file (a FIFO)",
            "z": os.path.join(self.src, "z-00002-of-00002.gguf") +
            ": not a regular file (a character device)",
        }
        if node:
            expect["d"] = node + ": not a regular file (a character device)"
        try:
            with gm.Mount(self.src, ["-o", "allow_other"]) as m:
                errors = {model: self.error_of(m, model) for model in expect}
        finally:
            opened = {k: opens_seen(fd) for k, fd in watches.items()}
        self.assertEqual(opened, {k: 0 for k in watches}, "the daemon opened them")
        self.assertEqual(errors, {model: ("ok", ("ggufs: %s\n" % line).encode())
                                  for model, line in expect.items()})

    def test_single_mount_shards_with_allow_other(self):
        """Issue 43, item 1, for `ggufs -o allow_other FILE`: the tree shows the named
        shard's owner and mode, so a shard 2 of root's own (mode 0600) beside nobody's
        shard 1 is refused at mount, naming it, where the old daemon served its tensor
        to nobody; a FIFO shard is refused, never opened; without allow_other the
        mounting user reads their own."""
        secret = b"TOPSECRET-TENSOR"
        first = self.put_shard("p-00001-of-00002.gguf", 1, 2)
        root_shard = self.put_shard("p-00002-of-00002.gguf", 2, 2, owner=0, data=secret,
                                    name="secret.weight")
        os.chmod(root_shard, 0o600)
        line = gm.refused_mount(["-o", "allow_other", first])
        self.assertEqual(line, "ggufs: %s: not read, as other users read the model: owned "
                         "by uid 0, not by uid 65534 as the first file is\n" % root_shard)
        with gm.Mount(first) as m:
            self.assertEqual(gm.read_file(m.p("tensors", "secret.weight")), secret)
        os.unlink(root_shard)
        os.mkfifo(root_shard)
        watch = watch_opens(root_shard)
        try:
            line = gm.refused_mount(["-o", "allow_other", first])
        finally:
            opened = opens_seen(watch)
        self.assertEqual(opened, 0, "the FIFO was opened")
        self.assertEqual(line, "ggufs: %s: not a regular file (a FIFO)\n" % root_shard)

    def swap_setup(self):
        """Nobody's decoy x.gguf (no GGUF), root's own file vault (mode 0600) in the
        library, and nobody's symlink link -> vault: (decoy, link, the hex of the first
        bytes of the vault as a parse error would quote them)."""
        decoy = self.put("x.gguf", b"decoy....\n")
        vault = os.path.join(self.src, "vault")
        with open(vault, "wb") as f:
            f.write(SECRET)
        os.chmod(vault, 0o600)
        return decoy, self.link("vault", "link"), secret_hex(SECRET).encode()

    def test_first_file_swapped_before_build(self):
        """Issue 43, item 1: nobody's model x looked up as nobody's decoy, then its name
        exchanged for a symlink to root's own file in the library before the model is
        built: the build parses nothing of root's file (the old daemon opened the name
        again and quoted root's first bytes in an error that nobody could read, under
        the decoy's owner and mode); the model is stale."""
        decoy, link, _ = self.swap_setup()
        with gm.Mount(self.src, ["-o", "allow_other"]) as m:
            def swap_then_build():
                fd = os.open(m.p("x"), os.O_PATH)   # looked up, not built
                exchange(decoy, link)
                try:
                    return gm.read_file("/proc/self/fd/%d/error" % fd)
                finally:
                    os.close(fd)
            self.assertEqual(as_nobody(swap_then_build), ("errno", errno.ESTALE))

    def test_first_file_exchange_race(self):
        """Issue 43, item 1, the review's race, bounded (20 s, 20,000 reads): nobody
        exchanges x.gguf with a symlink to root's own file while nobody looks the model
        up and reads its error (a build each time the name changed): no error ever holds
        root's bytes; the reads end in the decoy's error, ESTALE, EACCES or ENOENT."""
        decoy, link, leak = self.swap_setup()
        with gm.Mount(self.src, ["-o", "allow_other"]) as m:
            def race():
                stop = time.monotonic() + 20.0
                started_r, started_w = os.pipe()
                pid = os.fork()
                if pid == 0:   # the swapper (nobody too)
                    try:
                        os.close(started_r)
                        exchange(decoy, link)
                        exchange(decoy, link)
                        os.write(started_w, b"!")
                        while time.monotonic() < stop:
                            exchange(decoy, link)
                    finally:
                        os._exit(0)
                os.close(started_w)
                os.read(started_r, 1)   # b"" when the swapper failed: the reads then see it
                os.close(started_r)
                texts, errors, reads, leaked = 0, set(), 0, 0
                try:
                    for _ in range(20000):
                        if time.monotonic() >= stop or leaked:
                            break
                        reads += 1
                        try:   # looked up, then built, as the review's reader did
                            fd = os.open(m.p("x"), os.O_PATH)
                            try:
                                text = gm.read_file("/proc/self/fd/%d/error" % fd)
                            finally:
                                os.close(fd)
                            texts += 1
                            leaked += leak in text
                        except OSError as e:
                            errors.add(e.errno)
                finally:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                return b"%d %d %d %s" % (reads, texts, leaked,
                                         b",".join(b"%d" % e for e in sorted(errors)))
            kind, value = as_nobody(race)
            self.assertEqual(kind, "ok", value)
            reads, n_texts, leaked, errors = (value.split(b" ") + [b""])[:4]
            print("race: %s reads, %s errors read, %s with root's bytes, errnos %s" %
                  (reads.decode(), n_texts.decode(), leaked.decode(), errors.decode()))
            self.assertGreater(int(reads), 0)
            self.assertEqual(int(leaked), 0, value)
            self.assertLessEqual(set(errors.split(b",")) - {b""},
                                 {b"%d" % errno.EACCES, b"%d" % errno.ESTALE,
                                  b"%d" % errno.ENOENT}, value)

    def test_swapped_symlink_is_not_followed(self):
        """Item 1: a name exchanged for a symlink to a root-only file between its lookup
        and its open is ESTALE, never the file's bytes (they were TOPSECRET)."""
        # as long as the secret: a read of the decoy's size would get all of it
        decoy_bytes = b"decoy....\n"
        self.assertEqual(len(decoy_bytes), len(SECRET))
        decoy = self.put("decoy.txt", decoy_bytes)
        link = os.path.join(self.src, "link")
        self.assertEqual(as_nobody(lambda: open(self.secret, "rb").read()),
                         ("errno", errno.EACCES))
        with gm.Mount(self.src, ["-o", "allow_other"]) as m:
            # looked up as the decoy (and never read: no page of it cached), exchanged,
            # then opened: deterministic
            def swap_then_open():
                fd = os.open(m.p("decoy.txt"), os.O_PATH)
                os.symlink(self.secret, link)
                exchange(decoy, link)
                try:
                    return read_fd_path(fd)
                finally:
                    os.close(fd)
            self.assertEqual(as_nobody(swap_then_open), ("errno", errno.ESTALE))
            # the name is a symlink out of the library's folder now: not shown (item 4)
            self.assertEqual(as_nobody(lambda: gm.read_file(m.p("decoy.txt"))),
                             ("errno", errno.ENOENT))
            self.assertEqual(as_nobody(lambda: gm.read_file(m.p("link"))), ("ok", decoy_bytes))

            # the race the review ran: exchanges and reads by name at once, bounded
            def race():
                stop = time.monotonic() + 3.0
                pid = os.fork()
                if pid == 0:   # the swapper (nobody too)
                    try:
                        while time.monotonic() < stop:
                            exchange(decoy, link)
                    finally:
                        os._exit(0)
                got, errors = set(), set()
                try:
                    for _ in range(3000):
                        if time.monotonic() >= stop:
                            break
                        try:
                            got.add(gm.read_file(m.p("decoy.txt")))
                        except OSError as e:
                            errors.add(e.errno)
                finally:
                    os.waitpid(pid, 0)
                return b"|".join(sorted(got)) + b"#" + b",".join(b"%d" % e for e in sorted(errors))
            kind, value = as_nobody(race)
            self.assertEqual(kind, "ok")
            self.assertIn(value.split(b"#")[0], (b"", decoy_bytes), value)   # never SECRET
            self.assertLessEqual(set(value.split(b"#")[1].split(b",")) - {b""},
                                 {b"%d" % errno.EACCES, b"%d" % errno.ESTALE,
                                  b"%d" % errno.ENOENT}, value)

    def test_fifo_swapped_in_does_not_hang(self):
        """Item 2: a plain file replaced by a FIFO after its lookup is ESTALE at once; the
        daemon does not wait in the FIFO for a writer (its reader sat in D state)."""
        plain = self.put("plain.txt", b"plain\n")
        with gm.Mount(self.src, ["-o", "max_threads=2"]) as m:
            fds = [os.open(m.p("plain.txt"), os.O_PATH) for _ in range(3)]
            fifo = os.path.join(self.tmp, "fifo")
            os.mkfifo(fifo)
            os.rename(fifo, plain)
            results = []

            def opener(fd):
                try:
                    results.append(read_fd_path(fd))
                except OSError as e:
                    results.append(e.errno)
            threads = [threading.Thread(target=opener, args=(fd,), daemon=True) for fd in fds]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 10
            for t in threads:
                t.join(max(0.1, deadline - time.monotonic()))
            hung = sum(t.is_alive() for t in threads)
            # the root answers meanwhile (stat in a thread: it would hang too)
            root = threading.Thread(target=os.stat, args=(m.path,), daemon=True)
            root.start()
            root.join(5)
            root_hung = root.is_alive()
            for _ in range(len(threads)):
                if not any(t.is_alive() for t in threads):
                    break
                # an old daemon waits in the FIFO: a writer lets it go
                try:
                    os.close(os.open(plain, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass
                time.sleep(0.5)
            for t in threads:
                t.join(5)
            root.join(5)
            for fd in fds:
                os.close(fd)
            self.assertEqual(hung, 0, "opens waited in the FIFO")
            self.assertFalse(root_hung, "the mount stopped answering")
            self.assertEqual(results, [errno.ESTALE] * len(fds))
            # the FIFO is not shown
            self.assertNotIn("plain.txt", os.listdir(m.path))

    def tsv_paths(self, m, timeout=20):
        """The paths of models.tsv, read in a thread that must finish within timeout s
        (a walk that never ends holds the library meanwhile)."""
        out = []
        t = threading.Thread(target=lambda: out.append(gm.read_file(m.p("models.tsv"))),
                             daemon=True)
        t.start()
        t.join(timeout)
        self.assertFalse(t.is_alive(), "models.tsv took more than %d s" % timeout)
        return [line.split("\t")[0] for line in out[0].decode().splitlines()[1:]]

    def test_symlink_loops_are_left_out(self):
        """Item 3: a symlinked folder that leads back to itself or a folder above it is
        not shown, so models.tsv and --check walk each model once and end (two of them
        made a binary tree of depth 64: gigabytes, minutes)."""
        tiny = os.path.join(self.src, "a.gguf")
        gm.write_gguf(tiny, [("general.architecture", "a")], [])
        os.mkdir(os.path.join(self.src, "sub"))
        gm.write_gguf(os.path.join(self.src, "sub", "b.gguf"), [("general.architecture", "b")], [])
        os.mkdir(os.path.join(self.src, "real"))
        os.symlink("real", os.path.join(self.src, "alias"))   # no loop: shown
        os.symlink(".", os.path.join(self.src, "x"))
        with gm.Mount(self.src) as m:
            # one loop: the old walk stopped at depth 64, with each model 65 times
            self.assertEqual(self.tsv_paths(m), ["a", "sub/b"])
            self.assertEqual(sorted(os.listdir(m.path)),
                             ["a", "alias", "models.json", "models.tsv", "real", "sub"])
            self.assertFalse(os.path.exists(m.p("x")))
            # two, and one up from a subfolder
            os.symlink(".", os.path.join(self.src, "y"))
            os.symlink("..", os.path.join(self.src, "sub", "up"))
            os.symlink("../sub", os.path.join(self.src, "real", "side"))  # no loop: shown
            # a walk enters each folder once, at its first path in name order: real is
            # alias, sub is alias/side
            self.assertEqual(self.tsv_paths(m), ["a", "alias/side/b"])
            self.assertEqual(sorted(os.listdir(m.p("sub"))), ["b"])
            self.assertEqual(sorted(os.listdir(m.p("real", "side"))), ["b"])
            self.assertFalse(os.path.exists(m.p("real", "side", "up")))
        r = gm.run_ggufs(["--check", self.src], timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.decode().split("\n\n")), 2, r.stdout)

    def test_symlink_dag_walked_once_per_folder(self):
        """A chain of folders d0 .. d40, each holding two links a and b to the next, has
        no loop but 2^40 paths to the model in d40: models.tsv and --check walked them
        all (each level doubles the walk). A walk enters each folder (by device and
        inode) once, at its first path in name order, so both end at once with the model
        once; browsing by any of the paths still reaches it."""
        levels = 40
        for i in range(levels + 1):
            os.mkdir(os.path.join(self.src, "d%d" % i))
        for i in range(levels):
            for name in ("a", "b"):
                os.symlink("../d%d" % (i + 1), os.path.join(self.src, "d%d" % i, name))
        gm.write_gguf(os.path.join(self.src, "d%d" % levels, "m.gguf"),
                      [("general.architecture", "deep")], [])
        first = "/".join(["d0"] + ["a"] * levels + ["m"])
        with gm.Mount(self.src) as m:
            t0 = time.monotonic()
            self.assertEqual(self.tsv_paths(m, timeout=30), [first])
            took = time.monotonic() - t0
            with open(m.p("models.json"), "rb") as f:
                self.assertEqual(f.read().count(b'"path"'), 1)
            # by hand, any path: d0/b/a/b/.../m
            by_hand = m.p(*(["d0"] + ["ab"[i % 2] for i in range(levels)] + ["m"]))
            self.assertEqual(gm.read_file(os.path.join(by_hand, "metadata",
                                                       "general.architecture")), b"deep\n")
        self.assertLess(took, 30)
        try:
            r = gm.run_ggufs(["--check", self.src], timeout=30)
        except subprocess.TimeoutExpired:
            self.fail("--check took more than 30 s")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout.decode()
        self.assertEqual(len(out.split("\n\n")), 1, out)
        self.assertTrue(out.startswith(os.path.join(self.src, first) + ".gguf: "), out)

    def test_symlink_dag_browsed_memory_given_back(self):
        """Issue 43 item 8: find over a chain of 21 folders each linking twice to the next
        follows every path as shown (2^21), each a folder with its own slots and model;
        the daemon's memory grew without bound and was never given back (2 to 32.8 MB in
        60 s). Once the kernel forgets the paths (its caches dropped), the slots of
        folders nobody uses go, but for LIB_KEEP_IDLE_ENTRIES of them, and the memory
        with them; a path the kernel still knows keeps its numbers throughout."""
        levels = 21
        for i in range(levels + 1):
            d = os.path.join(self.src, "d%d" % i)
            os.mkdir(d)
            gm.write_gguf(os.path.join(d, "m.gguf"), [("general.architecture", "d%d" % i)], [])
            for name in ("a", "b") if i < levels else ():
                os.symlink("../d%d" % (i + 1), os.path.join(d, name))
        keep_idle_entries = 2048   # LIB_KEEP_IDLE_ENTRIES in lib/7-library/library.h

        def rss(pid):
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
            raise AssertionError("no VmRSS")

        def sanitized(pid):
            """True for a daemon built with AddressSanitizer, whose allocator keeps what
            is freed in quarantine: its VmRSS says nothing of what the library holds."""
            with open("/proc/%d/maps" % pid) as f:
                return "libasan" in f.read()

        def slots(m):
            try:
                return int(os.getxattr(m.path, "user.ggufs.slots"))
            except OSError:
                return None   # a daemon without the counter: waited for in vain

        def find_for(m, seconds, opens):
            """find over the mount until seconds pass or the daemon opened opens models
            more (each path's model is its own), then stopped."""
            start = int(os.getxattr(m.path, "user.ggufs.models_opened"))
            p = subprocess.Popen(["find", m.path], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline and p.poll() is None and \
                        int(os.getxattr(m.path, "user.ggufs.models_opened")) < start + opens:
                    time.sleep(0.25)
            finally:
                p.kill()
                p.wait()
            return int(os.getxattr(m.path, "user.ggufs.models_opened")) - start

        def forgotten(m, pid):
            """The kernel's dentries and inodes dropped, so that it forgets every path
            not in use; then (at most 20 s) the slots back under the bound and VmRSS
            steady: the daemon's RSS."""
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("2")
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                n = slots(m)
                if n is not None and n <= keep_idle_entries + 64:
                    break
                time.sleep(0.25)
            last = rss(pid)
            for _ in range(8):
                time.sleep(0.25)
                now = rss(pid)
                if now == last:
                    break
                last = now
            return last

        deep = ["d0"] + ["ab"[i % 2] for i in range(6)]
        with gm.Mount(self.src) as m:
            pid = m.proc.pid
            # a first walk makes the daemon's threads and their arenas, and the listings
            # kept while idle: the base
            find_for(m, 10, 4000)
            base = forgotten(m, pid)
            cwd = os.open(m.p(*deep), os.O_PATH)   # a shell's cwd, kept by the kernel
            try:
                numbers = [os.stat(m.p(*deep[:k])).st_ino for k in range(1, len(deep) + 1)]
                model = os.stat(m.p(*deep, "m", "metadata")).st_ino
                opened = find_for(m, 20, 8000)
                peak = rss(pid)
                after = forgotten(m, pid)
                print("\n  RSS base %.1f MB, after find %.1f MB (%d models opened), "
                      "after the kernel forgot %.1f MB; slots %s"
                      % (base / 1e6, peak / 1e6, opened, after / 1e6, slots(m)))
                self.assertGreater(opened, 500, "find made little progress")
                # at least half of what the find took is given back (none was)
                if not sanitized(pid):
                    self.assertGreater(peak - base, 1 << 20, "find made little progress")
                    self.assertLess(after - base, (peak - base) / 2,
                                    "VmRSS %d -> %d -> %d" % (base, peak, after))
                self.assertIsNotNone(slots(m))
                self.assertLessEqual(slots(m), keep_idle_entries + 64)
                # the path the kernel kept has its numbers, and serves
                self.assertEqual(os.fstat(cwd).st_ino, numbers[-1])
                self.assertEqual([os.stat(m.p(*deep[:k])).st_ino
                                  for k in range(1, len(deep) + 1)], numbers)
                self.assertEqual(os.stat(m.p(*deep, "m", "metadata")).st_ino, model)
                self.assertEqual(gm.read_file(os.path.join("/proc/self/fd/%d" % cwd, "m",
                                                           "metadata", "general.architecture")),
                                 b"d6\n")
                # and a path let go is looked up anew
                far = m.p(*(["d0"] + ["b"] * 12 + ["m", "metadata", "general.architecture"]))
                self.assertEqual(gm.read_file(far), b"d12\n")
            finally:
                os.close(cwd)

    def test_symlinks_out_of_the_root_with_allow_other(self):
        """Item 4: with allow_other, a symlink whose target leaves the library's folder is
        not shown (a 0644 file in a 0700 directory was served to every user); without
        it, symlinks are followed as before."""
        private = os.path.join(self.tmp, "private")
        os.mkdir(private, 0o700)
        with open(os.path.join(private, "pub.txt"), "wb") as f:
            f.write(b"PRIVATE\n")
        os.chmod(os.path.join(private, "pub.txt"), 0o644)
        gm.write_gguf(os.path.join(private, "p.gguf"), [("general.architecture", "p")], [])
        os.chmod(os.path.join(private, "p.gguf"), 0o644)
        self.put("inside.txt", b"inside\n")
        os.symlink(os.path.join(private, "pub.txt"), os.path.join(self.src, "out.txt"))
        os.symlink(private, os.path.join(self.src, "outdir"))
        os.symlink(os.path.join(private, "p.gguf"), os.path.join(self.src, "outmodel.gguf"))
        os.symlink("inside.txt", os.path.join(self.src, "in.txt"))
        self.assertEqual(as_nobody(lambda: gm.read_file(os.path.join(private, "pub.txt"))),
                         ("errno", errno.EACCES))
        with gm.Mount(self.src, ["-o", "allow_other"]) as m:
            self.assertEqual(sorted(os.listdir(m.path)),
                             ["in.txt", "inside.txt", "models.json", "models.tsv"])
            for name in ("out.txt", "outdir", "outmodel"):
                self.assertEqual(as_nobody(lambda: os.stat(m.p(name)) and b""),
                                 ("errno", errno.ENOENT), name)
            self.assertEqual(as_nobody(lambda: gm.read_file(m.p("outdir", "pub.txt"))),
                             ("errno", errno.ENOENT))
            self.assertEqual(as_nobody(lambda: gm.read_file(m.p("in.txt"))), ("ok", b"inside\n"))
            self.assertEqual(self.tsv_paths(m), [])
            # a symlink retargeted out after its listing is not followed either
            os.rename(os.path.join(self.src, "in.txt"), os.path.join(self.tmp, "in.txt"))
            os.symlink(os.path.join(private, "pub.txt"), os.path.join(self.src, "in.txt"))
            self.assertEqual(as_nobody(lambda: gm.read_file(m.p("in.txt"))),
                             ("errno", errno.ENOENT))
        # the mounting user alone: symlinks followed wherever they lead, as before
        with gm.Mount(self.src) as m:
            self.assertEqual(gm.read_file(m.p("out.txt")), b"PRIVATE\n")
            self.assertEqual(gm.read_file(m.p("outdir", "pub.txt")), b"PRIVATE\n")
            self.assertEqual(self.tsv_paths(m), ["outdir/p", "outmodel"])

    def test_model_rewritten_in_place_is_stale(self):
        """Item 5: a model released, then rewritten in place with its size kept and its
        mtime put back, is not rebuilt under its old numbers (a cached path named another
        key by position: general.name read general.architecture's value): they are
        ESTALE, and its name leads to a new version with new numbers."""
        model = os.path.join(self.src, "m.gguf")
        kvs = [("general.architecture", "arch"), ("general.name", "name")]
        gm.write_gguf(model, kvs, [])
        for i in range(8 + 1):   # LIB_KEEP_IDLE + 1: touching them all releases m
            gm.write_gguf(os.path.join(self.src, "o%d.gguf" % i), kvs, [])
        with gm.Mount(self.src) as m:
            old_dir = os.stat(m.p("m")).st_ino
            self.assertEqual(gm.read_file(m.p("m", "metadata", "general.name")), b"name\n")
            cwd = os.open(m.p("m", "metadata"), os.O_PATH)   # a shell's cwd
            try:
                for i in range(8 + 1):
                    os.listdir(m.p("o%d" % i, "metadata"))
                # the last directory's release may come after listdir returned: wait
                # (bounded) for the trim that follows it
                deadline = time.monotonic() + 10
                while int(os.getxattr(m.path, "user.ggufs.models_built")) > 8 and \
                        time.monotonic() < deadline:
                    os.stat(m.p("o0"))
                    time.sleep(0.05)
                self.assertLessEqual(int(os.getxattr(m.path, "user.ggufs.models_built")), 8)
                st = os.stat(model)
                size = st.st_size
                gm.write_gguf(model + ".x", list(reversed(kvs)), [])
                with open(model + ".x", "rb") as f:
                    data = f.read()
                self.assertEqual(len(data), size)
                with open(model, "r+b") as f:   # in place: the same inode
                    f.write(data)
                os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
                with self.assertRaises(OSError) as cm:
                    with open(os.path.join("/proc/self/fd/%d" % cwd, "general.name"), "rb") as f:
                        f.read()
                self.assertEqual(cm.exception.errno, errno.ESTALE)
            finally:
                os.close(cwd)
            self.assertNotEqual(os.stat(m.p("m")).st_ino, old_dir)
            self.assertEqual(gm.read_file(m.p("m", "metadata", "general.name")), b"name\n")
            self.assertEqual(gm.read_file(m.p("m", "metadata", "general.architecture")), b"arch\n")

    def test_slots_of_versions_gone_are_freed(self):
        """Item 6: each round makes a new version of every file (one listing of them);
        the slots of the versions gone are freed and their places taken again under a
        new generation, so the places stay about as many as the files (they grew with
        every version), no number is given twice, a number of a folder gone names
        nothing (ESTALE), and what is open keeps its version."""
        n_files, rounds = 40, 100
        paths = [self.put("f%02d.txt" % i, b"data %d\n" % i) for i in range(n_files)]
        os.mkdir(os.path.join(self.src, "d"))
        self.put("d/inside.txt", b"inside\n")
        model = os.path.join(self.src, "m.gguf")
        gm.write_gguf(model, [("general.architecture", "first")], [])
        with gm.Mount(self.src) as m:
            arch = open(m.p("m", "metadata", "general.architecture"), "rb")
            plain = open(m.p("f00.txt"), "rb")
            dfd = os.open(m.p("d"), os.O_PATH)
            try:
                numbers = set()
                deadline = time.monotonic() + 120
                for r in range(rounds):
                    self.assertLess(time.monotonic(), deadline, "round %d" % r)
                    for p in paths:
                        os.utime(p, ns=(r * 1000 + 1, r * 1000 + 1))
                    names = [n for n in os.listdir(m.path) if n.startswith("f")]
                    self.assertEqual(len(names), n_files)
                    for n in names:
                        numbers.add(os.stat(m.p(n)).st_ino)
                    if r == 0:
                        # the model replaced, and folder d removed (listed without it)
                        # and made again: new versions
                        gm.write_gguf(model + ".new", [("general.architecture", "second")], [])
                        os.rename(model + ".new", model)
                        os.rename(os.path.join(self.src, "d"), os.path.join(self.tmp, "d"))
                        os.listdir(m.path)
                        os.rename(os.path.join(self.tmp, "d"), os.path.join(self.src, "d"))
                self.assertEqual(len(numbers), n_files * rounds, "a number given twice")
                places = {(ino >> 32) & ((1 << 23) - 1) for ino in numbers}
                generations = {ino >> (32 + 23) for ino in numbers}
                # places: the files' and the queue of freed ones (1,024), not 4,000
                self.assertLess(max(places), 1024 + 8 * n_files, "slots never freed")
                self.assertGreater(max(generations), 0)
                # the number of d as it was names nothing now; d's new one its files
                with self.assertRaises(OSError) as cm:
                    os.listdir("/proc/self/fd/%d" % dfd)
                self.assertEqual(cm.exception.errno, errno.ESTALE)
                self.assertEqual(os.listdir(m.p("d")), ["inside.txt"])
                # the open files keep the versions they opened; the names show the new
                self.assertEqual(arch.read(), b"first\n")
                self.assertEqual(plain.read(), b"data 0\n")
                self.assertEqual(gm.read_file(m.p("m", "metadata", "general.architecture")),
                                 b"second\n")
            finally:
                arch.close()
                plain.close()
                os.close(dfd)


if __name__ == "__main__":
    gm.main()
