#!/usr/bin/env python3
"""quants/ offers a NAME only when llama.cpp makes that file (issue 45): for models llama.cpp
refuses before it writes a byte, llama_model_quantize() of the pinned libllama (through
ctypes) and ggufs's plan (quant_plan_dump) refuse the same models for the same reason,
and both make the known ones. The architectures ggufs knows (lib/1-format/llama_archs.c)
are those of the pinned llama.cpp's source (node-llama-cpp's gitRelease.bundle), through
gen_llama_archs.py.

The models: random llamas (test_quant_plan.random_llama) whose general.architecture and
keys' prefix are an unknown name ("nosucharch"), LLM_ARCH_UNKNOWN's own "(unknown)",
one llama.cpp names but makes no model of ("gptj"), no general.architecture at all;
llamas without a key load_hparams requires (context_length, embedding_length) or the
llama's own load_arch_hparams requires (its norm's epsilon), with a key of another type
(general.name, rope.freq_base, the epsilon), an unknown rope scaling type, a rotation
shorter than a head, expert groups as many as experts, float classifier labels (some
of which llama.cpp asserts against: it aborts, so it runs in a child process); the
same llama under each of the 148 architectures llama.cpp knows; and known ones
("llama", "qwen2", "gptneox" with its keys, per-layer head counts as int32 and bool
arrays) that both make.

Usage: test_quant_refuse.py QUANT_PLAN_DUMP. Skipped (77) without the installed
node-llama-cpp package, unless GGUFS_REQUIRE_LLAMA is set."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_quant_plan as qp  # noqa: E402

ROOT = os.path.join(HERE, "..", "..")
BUNDLE = os.path.join(HERE, "..", "llama", "node_modules", "node-llama-cpp", "llama",
                      "gitRelease.bundle")
DUMP = None
# a child process: llama_model_quantize(argv[2], argv[3], ftype argv[4]), llama.cpp's log
# to stderr, its result the exit status
CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
import test_quant_plan as qp
llama = qp.Llama(qp.find_libllama())
log = qp.LOG_CB(lambda level, text, ud: sys.stderr.write(text.decode(errors="replace")))
llama.lib.llama_log_set(log, None)
sys.exit(1 if llama.quantize(sys.argv[2], sys.argv[3], int(sys.argv[4])) else 0)
"""
SMALL = dict(seed=21, n_embd=64, n_ff=128, n_layer=2, n_head=4, n_head_kv=2, n_vocab=64,
             gtype=qp.F16)


class Refuse(qp.QuantCase):
    PREFIX = "ggufs-quant-refuse-"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.log = []
        cls.keep = qp.LOG_CB(lambda level, text, ud: cls.log.append(text.decode(errors="replace")))
        cls.llama.lib.llama_log_set(cls.keep, None)

    def model(self, name, **kw):
        path = os.path.join(self.dir, name + ".gguf")
        qp.random_llama(path, **dict(SMALL, **kw))
        return path

    def both(self, src, name):
        """(llama.cpp's return code, its log, quant_plan_dump's exit code, its stderr)
        for NAME of src."""
        ref, ours = os.path.join(self.dir, "ref.gguf"), os.path.join(self.dir, "ours.gguf")
        for p in (ref, ours):
            if os.path.exists(p):
                os.unlink(p)
        del self.log[:]
        rc = self.llama.quantize(src, ref, qp.FTYPE[name])
        return (rc, "".join(self.log)) + self.dump(src, name)

    def dump(self, src, name):
        """quant_plan_dump's exit code and stderr for NAME of src (ours.gguf)."""
        r = subprocess.run([DUMP, src, name, os.path.join(self.dir, "ours.gguf")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        return r.returncode, r.stderr.decode(errors="replace")

    def check_refused(self, src, why):
        """Every NAME: llama.cpp writes nothing and says why; ggufs plans nothing and
        says the same."""
        for name, _ in qp.NAMES:
            with self.subTest(name=name):
                rc, log, drc, err = self.both(src, name)
                self.assertNotEqual(rc, 0, "llama.cpp made %s" % name)
                self.assertIn(why, log)
                self.assertEqual(drc, 3, "ggufs planned %s: %s" % (name, err))
                self.assertIn(why, err)

    def test_unknown(self):
        """An architecture llama.cpp does not know, and LLM_ARCH_UNKNOWN's name."""
        for arch in ("nosucharch", "(unknown)"):
            with self.subTest(arch=arch):
                self.check_refused(self.model(arch, arch=arch),
                                   "unknown model architecture: '%s'" % arch)

    def test_unsupported(self):
        """An architecture llama.cpp names but makes no model of."""
        self.check_refused(self.model("gptj", arch="gptj"),
                           "unsupported model architecture: 'gptj'")

    def test_no_architecture(self):
        """No general.architecture: both refuse (llama.cpp: an unknown '')."""
        src = self.model("none", kv_edit=lambda kvs: [kv for kv in kvs
                                                       if kv[0] != "general.architecture"])
        for name in ("F16", "Q4_K_M"):
            rc, log, drc, err = self.both(src, name)
            self.assertIn("unknown model architecture: ''", log)
            self.assertNotEqual(rc, 0)
            self.assertEqual(drc, 3, err)

    def test_known(self):
        """Known architectures, with the keys their load_arch_hparams requires (a
        GPT-NeoX's norm epsilon and parallel residual flag): both make every NAME the
        rows allow (Q1_0's 128-value blocks do not fit rows of 64), of the same size."""
        neox = [("gptneox.attention.layer_norm_epsilon", "f32", 1e-5),
                ("gptneox.use_parallel_residual", "bool", 1)]
        for arch in ("llama", "qwen2", "gptneox"):
            src = self.model(arch, arch=arch,
                             kv_edit=(lambda kvs: kvs + neox) if arch == "gptneox" else None)
            for name, _ in qp.NAMES:
                with self.subTest(arch=arch, name=name):
                    rc, log, drc, err = self.both(src, name)
                    self.assertEqual(rc == 0, name != "Q1_0", log)
                    self.assertEqual(drc, 0 if rc == 0 else 3, err)
                    if rc == 0:
                        self.assertEqual(os.path.getsize(os.path.join(self.dir, "ours.gguf")),
                                         os.path.getsize(os.path.join(self.dir, "ref.gguf")))

    def child(self, src, name):
        """llama_model_quantize of src to NAME in a child process (llama.cpp aborts on a
        failed assertion): (its exit status, a signal's negative, and its log)."""
        ref = os.path.join(self.dir, "child.gguf")
        # no backtrace: ggml would attach gdb to the child for it
        env = dict(os.environ, GGML_NO_BACKTRACE="1")
        r = subprocess.run([sys.executable, "-c", CHILD, HERE, src, ref, str(qp.FTYPE[name])],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                           timeout=300)
        if os.path.exists(ref):
            os.unlink(ref)
        return r.returncode, r.stderr.decode(errors="replace")

    def test_hparams(self):
        """Keys load_hparams reads: llama.cpp refuses (or aborts on) each model, and
        ggufs refuses it with llama.cpp's words (or the assertion it fails)."""
        def drop(key):
            return lambda kvs: [kv for kv in kvs if kv[0] != key]

        def put(key, vtype, value):
            return lambda kvs: [kv for kv in kvs if kv[0] != key] + [(key, vtype, value)]
        cases = [
            ("no-ctx", drop("llama.context_length"), None,
             "key not found in model: llama.context_length"),
            ("no-embd", drop("llama.embedding_length"), None,
             "key not found in model: llama.embedding_length"),
            ("name-u32", put("general.name", "u32", 7), None,
             "key general.name has wrong type u32 but expected type str"),
            ("base-u32", put("llama.rope.freq_base", "u32", 10000), None,
             "key llama.rope.freq_base has wrong type u32 but expected type f32"),
            ("n-rot", put("llama.rope.dimension_count", "u32", 8), None,
             "invalid n_rot: 8, expected 16"),
            ("labels", put("llama.classifier.output_labels", ("arr", "f32"), [0.5]), None,
             "llama.classifier.output_labels has wrong array element type f32"),
            ("no-eps", drop("llama.attention.layer_norm_rms_epsilon"), None,
             "key not found in model: llama.attention.layer_norm_rms_epsilon"),
            ("eps-u32", put("llama.attention.layer_norm_rms_epsilon", "u32", 0), None,
             "key llama.attention.layer_norm_rms_epsilon has wrong type u32 but expected "
             "type f32"),
            ("rope-type", put("llama.rope.scaling.type", "str", "cubic"), "GGML_ASSERT",
             "llama.rope.scaling.type is not none, linear, yarn or longrope"),
            ("groups", lambda kvs: kvs + [("llama.expert_group_count", "u32", 8)], "GGML_ASSERT",
             "expert_group_count below expert_count"),
        ]
        for tag, edit, llama_says, ggufs_says in cases:
            kw = dict(n_expert=8, n_ff=32) if tag == "groups" else {}
            src = self.model(tag, kv_edit=edit, **kw)
            for name in ("F16", "Q4_K_M"):
                with self.subTest(case=tag, name=name):
                    rc, log = self.child(src, name)
                    self.assertNotEqual(rc, 0, "llama.cpp made %s" % name)
                    self.assertIn(llama_says or ggufs_says, log)
                    drc, err = self.dump(src, name)
                    self.assertEqual(drc, 3, "ggufs planned %s: %s" % (name, err))
                    self.assertIn(ggufs_says, err)

    def test_per_layer_heads(self):
        """Head counts per layer, as int32 and as bool arrays (llama.cpp reads a bool as
        0 or 1): both make the file, of the same size."""
        for tag, kv in (("i32", ("llama.attention.head_count_kv", ("arr", "i32"), [2, 2])),
                        ("bool", ("llama.attention.head_count_kv", ("arr", "bool"), [1, 1]))):
            src = self.model("heads-" + tag, kv_edit=lambda kvs, kv=kv: [
                x for x in kvs if x[0] != kv[0]] + [kv])
            for name in ("F16", "Q4_K_M", "Q3_K_M"):
                with self.subTest(case=tag, name=name):
                    rc, log, drc, err = self.both(src, name)
                    self.assertEqual(rc, 0, log)
                    self.assertEqual(drc, 0, err)
                    self.assertEqual(os.path.getsize(os.path.join(self.dir, "ours.gguf")),
                                     os.path.getsize(os.path.join(self.dir, "ref.gguf")))

    def test_every_arch(self):
        """A small llama's tensors and generic keys under every architecture llama.cpp
        knows: llama.cpp makes Q8_0 exactly when ggufs does. Where it refuses (a key
        the architecture requires missing), ggufs gives the same reason; or, where
        llama.cpp requires a key under a condition ggufs does not follow (DeepSeek2's
        q_lora_rank, unless a "lite" model) or names it in words of its own (DFlash's
        target_layers), a key of that architecture missing too."""
        with open(os.path.join(ROOT, "lib", "1-format", "llama_archs.c")) as f:
            names = re.findall(r'^\t\{ "([^"]+)", (?:true|false), ', f.read(), re.M)
        self.assertGreater(len(names), 100)
        made, same = 0, 0
        for arch in names:
            with self.subTest(arch=arch):
                src = self.model("every", arch=arch)
                rc, log = self.child(src, "Q8_0")
                drc, err = self.dump(src, "Q8_0")
                self.assertEqual(drc, 0 if rc == 0 else 3, "llama.cpp: %s; ggufs: %s" % (
                    [line for line in log.splitlines() if "quantize:" in line], err))
                made += rc == 0
                if rc != 0:
                    why = re.search(r"failed to quantize: (.*)", log)
                    ours = err.strip().split(": ", 1)[1]
                    self.assertIsNotNone(why, log)
                    same += ours == why.group(1)
                    if ours != why.group(1):
                        missing = r"(array )?key not found in model: %s\." % re.escape(arch)
                        self.assertRegex(ours, "^" + missing)
                        self.assertRegex(why.group(1), "^%s|requires '" % missing)
        print("\narchitectures: %d; Q8_0 made by both of %d; refused by both for the same "
              "reason %d, for a missing key %d" % (len(names), made, same,
                                                  len(names) - made - same), file=sys.stderr)

    def test_table(self):
        """lib/1-format/llama_archs.c is what gen_llama_archs.py makes of the pinned
        llama.cpp's source."""
        src = tempfile.mkdtemp(prefix="ggufs-llama-src-", dir=self.dir)
        subprocess.run(["git", "clone", "-q", "-n", BUNDLE, src], check=True, timeout=300)
        subprocess.run(["git", "-C", src, "checkout", "-q", "HEAD", "--", "src/llama-arch.cpp",
                        "src/llama-model.cpp", "src/llama-hparams.h", "src/models"],
                       check=True, timeout=120)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "lib", "1-format",
                                                         "gen_llama_archs.py"),
                            "--check", src, os.path.join(ROOT, "lib", "1-format",
                                                         "llama_archs.c")],
                           stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        shutil.rmtree(src)


def main():
    global DUMP
    DUMP = sys.argv.pop(1)
    lib = qp.find_libllama()
    if not lib or not os.path.isfile(lib) or not os.path.isfile(BUNDLE):
        if os.environ.get("GGUFS_REQUIRE_LLAMA"):
            print("libllama of node-llama-cpp is not installed", file=sys.stderr)
            sys.exit(1)
        print("skipped: libllama of node-llama-cpp is not installed (npm ci in tests/llama)")
        sys.exit(77)
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
