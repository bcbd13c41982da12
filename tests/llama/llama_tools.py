"""The pinned llama.cpp's own tools, for tests that take llama.cpp as the reference: built
from the source node-llama-cpp ships (node_modules/node-llama-cpp/llama/gitRelease.bundle)
with g++ and linked to the libraries it ships built from that source (libllama-common.so
holds llama.cpp's common/, so a tool is its one .cpp file). Built once into a cache
folder the caller names (the tests give their build folder's), under a lock, so tests
running at once build each tool once.

    tools = LlamaTools(cache_dir)     # .available() False without the package or g++
    tools.build("quantize")           # tools/quantize -> llama-quantize
    tools.build("imatrix")            # tools/imatrix  -> llama-imatrix
    tools.build("imatrix_ref", extra=HERE/imatrix_ref.cpp, with_dir="tools/quantize")
    tools.build("quantize_many", extra=HERE/quantize_many.cpp, with_dir="tools/quantize")
    subprocess.run([...], env=tools.env())   # a tool that runs a model finds its CPU backend
"""
import fcntl
import glob
import hashlib
import os
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "node_modules", "node-llama-cpp")
BUNDLE = os.path.join(PACKAGE, "llama", "gitRelease.bundle")
BINS = os.path.join(HERE, "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64")
# what a tool's one file needs of the source tree
SOURCE_PATHS = ["include", "common", "ggml/include", "vendor", "tools/quantize", "tools/imatrix"]
# each tool: the .cpp files of the source tree it is made of
TOOLS = {
    "quantize": ["tools/quantize/quantize.cpp", "tools/quantize/main.cpp"],
    "imatrix": ["tools/imatrix/imatrix.cpp"],
}


class LlamaTools:
    def __init__(self, cache_dir):
        self.cache_dir = os.path.abspath(cache_dir)

    def libraries(self):
        """The shipped libraries a tool links to, by path: llama's common, llama, ggml."""
        names = ["libllama-common.so", "libllama.*so", "libggml-base.so", "libggml.*so"]
        found = []
        for pattern in names:
            hits = sorted(glob.glob(os.path.join(BINS, pattern)))
            if not hits:
                return None
            found.append(hits[0])
        return found

    def available(self):
        return (os.path.isfile(BUNDLE) and shutil.which("g++") is not None
                and shutil.which("git") is not None and self.libraries() is not None)

    def env(self):
        """The environment for running a tool: ggml loads its CPU backend from the one
        portable build the package ships."""
        env = dict(os.environ)
        env["GGML_BACKEND_PATH"] = os.path.join(BINS, "libggml-cpu-x64.so")
        return env

    def _source(self):
        """The source tree's files a tool needs, extracted once per bundle."""
        with open(BUNDLE, "rb") as f:
            stamp = hashlib.sha256(f.read()).hexdigest()[:16]
        src = os.path.join(self.cache_dir, "src-" + stamp)
        if os.path.isdir(src):
            return src
        git = src + ".git"
        shutil.rmtree(git, ignore_errors=True)
        subprocess.run(["git", "clone", "--quiet", "--bare", BUNDLE, git], check=True)
        tmp = src + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        archive = subprocess.run(["git", "--git-dir", git, "archive", "HEAD"] + SOURCE_PATHS,
                                 check=True, stdout=subprocess.PIPE).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        shutil.rmtree(git)
        os.rename(tmp, src)
        return src

    def build(self, name, extra=None, with_dir=None):
        """The path of tool name, built when missing: TOOLS[name]'s files, or extra (a
        test's own .cpp) compiled with the source folder with_dir on its include path."""
        os.makedirs(self.cache_dir, exist_ok=True)
        with open(os.path.join(self.cache_dir, "lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            src = self._source()
            out = os.path.join(self.cache_dir, name)
            inputs = [extra] if extra else [os.path.join(src, p) for p in TOOLS[name]]
            if os.path.exists(out) and all(os.path.getmtime(out) >= os.path.getmtime(i)
                                           for i in inputs):
                return out
            incs = ["include", "ggml/include", "common", "vendor"]
            if with_dir:
                incs.append(with_dir)
            cmd = ["g++", "-std=c++17", "-O1", "-w", "-o", out + ".tmp"]
            cmd += ["-I" + os.path.join(src, i) for i in incs]
            cmd += inputs + self.libraries() + ["-Wl,-rpath," + BINS, "-lpthread"]
            subprocess.run(cmd, check=True)
            os.rename(out + ".tmp", out)
            return out
