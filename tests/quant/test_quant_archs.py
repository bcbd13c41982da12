#!/usr/bin/env python3
"""quants/ offers a NAME only of a model whose architecture llama.cpp quantizes (issue
45): llama_model_quantize() of the pinned libllama (through ctypes) and ggufs's plan
(quant_plan_dump) refuse the same models for the same reason, and make the same known
ones. The architectures ggufs knows (lib/1-format/llama_archs.c) are those of the pinned
llama.cpp's source (node-llama-cpp's gitRelease.bundle), through gen_llama_archs.py.

The models: random llamas (test_quant_plan.random_llama) whose general.architecture and
keys' prefix are an unknown name ("nosucharch"), LLM_ARCH_UNKNOWN's own "(unknown)",
one llama.cpp names but makes no model of ("gptj"), no general.architecture at all, and
known ones ("llama", "qwen2") that both make.

Usage: test_quant_archs.py QUANT_PLAN_DUMP. Skipped (77) without the installed
node-llama-cpp package, unless GGUFS_REQUIRE_LLAMA is set."""
import os
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
SMALL = dict(seed=21, n_embd=64, n_ff=128, n_layer=2, n_head=4, n_head_kv=2, n_vocab=64,
             gtype=qp.F16)


class Archs(qp.QuantCase):
    PREFIX = "ggufs-quant-archs-"

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
        r = subprocess.run([DUMP, src, name, ours], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        return rc, "".join(self.log), r.returncode, r.stderr.decode(errors="replace")

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
        """Known architectures: both make every NAME the rows allow (Q1_0's 128-value
        blocks do not fit rows of 64), of the same size."""
        for arch in ("llama", "qwen2"):
            src = self.model(arch, arch=arch)
            for name, _ in qp.NAMES:
                with self.subTest(arch=arch, name=name):
                    rc, log, drc, err = self.both(src, name)
                    self.assertEqual(rc == 0, name != "Q1_0", log)
                    self.assertEqual(drc, 0 if rc == 0 else 3, err)
                    if rc == 0:
                        self.assertEqual(os.path.getsize(os.path.join(self.dir, "ours.gguf")),
                                         os.path.getsize(os.path.join(self.dir, "ref.gguf")))

    def test_table(self):
        """lib/1-format/llama_archs.c is what gen_llama_archs.py makes of the pinned
        llama.cpp's source."""
        src = tempfile.mkdtemp(prefix="ggufs-llama-src-", dir=self.dir)
        subprocess.run(["git", "clone", "-q", "-n", BUNDLE, src], check=True, timeout=300)
        subprocess.run(["git", "-C", src, "checkout", "-q", "HEAD", "--", "src/llama-arch.cpp",
                        "src/llama-model.cpp"], check=True, timeout=120)
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
