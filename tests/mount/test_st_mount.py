#!/usr/bin/env python3
"""A Hugging Face model folder mounted (issue 47): `ggufs DIR MNT` on each folder of
tests/data/st serves model.gguf byte for byte as the pinned convert_hf_to_gguf.py
writes it, for every -o outtype (the sha256 of the converter's output in
expected-SHA256SUMS); metadata/ and tensors/ are those of a mount of the converter's
own file; a folder of another architecture, or a bad outtype, is refused in one line;
a folder without config.json stays a library; in a library, a model folder is one model
directory. A .safetensors part written to in place
or cut short under the mount: every read of model.gguf and quants/ after it is EIO,
never a byte of the other version; the bytes read before it were right.

Usage: test_st_mount.py GGUFS_BINARY (skipped, 77, without /dev/fuse)."""
import errno
import os
import shutil

import ggufs_mount as gm

ST = os.path.join(gm.DATA, "st")
FOLDERS = ("llama-spm-f32", "mistral-spm", "llama-spm-sharded")
OUTTYPES = ("auto", "f32", "f16", "bf16", "q8_0")
REFERENCE = os.path.join(ST, "llama-spm-f32.auto.gguf")


def expected_sums():
    """{(folder, outtype): sha256} of the converter's outputs."""
    sums = {}
    with open(os.path.join(ST, "expected-SHA256SUMS")) as f:
        for line in f:
            digest, name = line.split()
            folder, outtype, _ = name.rsplit(".", 2)
            sums[(folder, outtype)] = digest
    return sums


def tree_files(root, sub):
    """{relative path: bytes} of every file under root/sub."""
    out = {}
    base = os.path.join(root, sub)
    for d, _, files in os.walk(base):
        for name in files:
            p = os.path.join(d, name)
            out[os.path.relpath(p, root)] = gm.read_file(p)
    return out


class StMount(gm.ScratchCase):

    def test_model_gguf_every_outtype(self):
        """model.gguf of each folder for each outtype: the converter's sha256."""
        sums = expected_sums()
        self.assertEqual(len(sums), len(FOLDERS) * len(OUTTYPES))
        for folder in FOLDERS:
            for outtype in OUTTYPES:
                with self.subTest(folder=folder, outtype=outtype):
                    opts = [] if outtype == "auto" else ["-o", "outtype=" + outtype]
                    with gm.Mount(os.path.join(ST, folder), opts) as m:
                        self.assertEqual(gm.sha256_file(m.p("model.gguf"), 4096),
                                         sums[(folder, outtype)])
                        self.assertEqual(os.stat(m.p("model.gguf")).st_size,
                                         len(gm.read_file(m.p("model.gguf"))))

    def test_metadata_and_tensors_as_the_converters_file(self):
        """metadata/, tensors/ and stats.tsv of the folder's mount are those of a mount
        of the converter's file, file by file."""
        with gm.Mount(os.path.join(ST, "llama-spm-f32")) as m, gm.Mount(REFERENCE) as ref:
            for sub in ("metadata", "tensors", "stats.tsv"):
                got = tree_files(m.path, sub) if sub != "stats.tsv" else \
                    {sub: gm.read_file(m.p(sub))}
                want = tree_files(ref.path, sub) if sub != "stats.tsv" else \
                    {sub: gm.read_file(ref.p(sub))}
                self.assertGreater(len(want), 0)
                self.assertEqual(sorted(got), sorted(want), sub)
                for name in want:
                    self.assertEqual(got[name], want[name], name)
            self.assertEqual(gm.read_file(m.p("model.gguf")), gm.read_file(REFERENCE))

    def test_refusals(self):
        """Another architecture: one line naming it and config.json; a bad outtype: a
        usage error; with -o allow_other, a part others may not read; a folder without
        config.json: a library, not a model."""
        folder = os.path.join(self.tmp, "qwen")
        shutil.copytree(os.path.join(ST, "mistral-spm"), folder)
        path = os.path.join(folder, "config.json")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("MistralForCausalLM", "Qwen2ForCausalLM"))
        err = gm.refused_mount([folder])
        self.assertTrue(err.startswith("ggufs: %s: architecture 'Qwen2ForCausalLM' is "
                                       "not one ggufs converts" % path), err)
        self.assertIn("LlamaForCausalLM", err)
        r = gm.run_ggufs(["-o", "outtype=q4_0", os.path.join(ST, "mistral-spm"), self.mnt])
        self.assertEqual(r.returncode, 2)
        self.assertIn(b"outtype", r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        # shared with -o allow_other, a part must let read whom config.json lets read
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
        part = os.path.join(folder, "model.safetensors")
        os.chmod(part, 0o600)
        err = gm.refused_mount(["-o", "allow_other", folder])
        self.assertTrue(err.startswith("ggufs: %s: not read, as other users read" % part), err)
        os.unlink(path)
        with gm.Mount(folder) as m:
            self.assertNotIn("model.gguf", os.listdir(m.path))
            self.assertIn("models.tsv", os.listdir(m.path))

    def test_in_a_library(self):
        """In a local library, a model folder is one model directory of its name (its
        model.gguf the converter's, metadata/, tensors/, quants/, a row of models.tsv),
        beside a GGUF file's; a folder without config.json stays a folder; a part
        written to in place makes model.gguf's reads EIO."""
        lib = os.path.join(self.tmp, "lib")
        os.makedirs(os.path.join(lib, "plain"))
        folder = os.path.join(lib, "llama-spm-f32")
        shutil.copytree(os.path.join(ST, "llama-spm-f32"), folder)
        shutil.copytree(os.path.join(ST, "llama-spm-sharded"),
                        os.path.join(lib, "plain", "llama-spm-sharded"))
        shutil.copyfile(REFERENCE, os.path.join(lib, "ref.gguf"))
        want = gm.read_file(REFERENCE)
        with gm.Mount(lib) as m:
            self.assertEqual(sorted(os.listdir(m.path)),
                             ["llama-spm-f32", "models.json", "models.tsv", "plain", "ref"])
            d = m.p("llama-spm-f32")
            for name in ("model.gguf", "metadata", "tensors", "quants", "summary.txt"):
                self.assertIn(name, os.listdir(d))
            self.assertEqual(gm.read_file(os.path.join(d, "model.gguf")), want)
            self.assertEqual(sorted(os.listdir(os.path.join(d, "tensors"))),
                             sorted(os.listdir(m.p("ref", "tensors"))))
            self.assertEqual(gm.read_file(os.path.join(d, "metadata", "general.name")),
                             gm.read_file(m.p("ref", "metadata", "general.name")))
            self.assertIn("Q4_K_M.gguf", os.listdir(os.path.join(d, "quants")))
            self.assertEqual(gm.sha256_file(m.p("plain", "llama-spm-sharded", "model.gguf")),
                             expected_sums()[("llama-spm-sharded", "auto")])
            with open(m.p("models.tsv")) as f:
                rows = [line.split("\t")[0] for line in f.read().splitlines()[1:]]
            self.assertEqual(rows, ["llama-spm-f32", "plain/llama-spm-sharded", "ref"])
            part = os.path.join(folder, "model.safetensors")
            with open(part, "r+b") as f:
                f.seek(400000)
                f.write(b"\xff" * 4096)
            with self.assertRaises(OSError) as cm:
                gm.pread_direct(os.path.join(d, "model.gguf"), 4096, 200704)
            self.assertEqual(cm.exception.errno, errno.EIO)

    def changed_under_the_mount(self, change):
        """Mounts a copy of llama-spm-f32, reads model.gguf and quants/Q8_0.gguf's
        header (right), calls change(model.safetensors's path), then reads model.gguf
        at every 4 KiB and quants/Q8_0.gguf: EIO each, never another byte; the log says
        which part changed."""
        folder = os.path.join(self.tmp, "llama-spm-f32")
        shutil.copytree(os.path.join(ST, "llama-spm-f32"), folder)
        want = gm.read_file(REFERENCE)
        log = os.path.join(self.tmp, "log")
        with gm.Mount(folder, ["-o", "log=" + log]) as m:
            model = m.p("model.gguf")
            self.assertEqual(gm.pread_direct(model, len(want), 0), want)
            self.assertEqual(len(gm.pread_direct(m.p("quants", "Q8_0.gguf"), 4096, 0)), 4096)
            change(os.path.join(folder, "model.safetensors"))
            failed = 0
            for off in range(0, len(want), 4096):
                try:
                    got = gm.pread_direct(model, 4096, off)
                except OSError as e:
                    self.assertEqual(e.errno, errno.EIO)
                    failed += 1
                    continue
                self.assertEqual(got, want[off:off + 4096], off)
            self.assertEqual(failed, (len(want) + 4095) // 4096)
            for path in (m.p("quants", "Q8_0.gguf"), m.p("quants", "Q4_K_M.gguf"),
                         m.p("tensors", "blk.0.ffn_up.weight"),
                         m.p("tensors", "blk.1.attn_q.weight.f32")):
                with self.assertRaises(OSError) as cm:
                    gm.pread_direct(path, 4096, 0)
                self.assertEqual(cm.exception.errno, errno.EIO, path)
        with open(log) as f:
            text = f.read()
        self.assertIn(os.path.join(folder, "model.safetensors"), text)

    def test_part_written_in_place(self):
        def rewrite(path):
            size = os.path.getsize(path)
            with open(path, "r+b") as f:
                f.seek(size // 2)
                old = f.read(4096)
                f.seek(size // 2)
                f.write(bytes(b ^ 0x55 for b in old))
            self.assertEqual(os.path.getsize(path), size)
        self.changed_under_the_mount(rewrite)

    def test_part_cut_short(self):
        self.changed_under_the_mount(lambda path: os.truncate(path, os.path.getsize(path) // 2))


if __name__ == "__main__":
    gm.main()
