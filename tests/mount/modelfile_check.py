"""Checks of a mount's model.gguf shared by the local and remote tests: it parses back
with the project's own parser (model.gguf mounted itself with ggufs) into the keys,
values and tensors that the mount's tree shows, each tensor's bytes equal to its raw
file in the tree."""
import json
import os

import ggufs_mount as gm

# the keys that make a file a shard: a merged model.gguf has none of them
SPLIT_KEYS = ("split.no", "split.count", "split.tensors.count")


def load_json(path):
    with open(path, "rb") as f:
        return json.load(f)


def parses_back(tc, root):
    """Mounts root/model.gguf with ggufs and compares the two trees: metadata (less the
    split keys) in the same order with the same types and values, the same tensors in
    the same order (name, type, dims), laid out in one data section at the model's
    alignment, and each tensor's raw file byte for byte. Returns the inner gguf.json."""
    outer = load_json(os.path.join(root, "gguf.json"))
    tc.assertEqual(outer["model"], "model.gguf")
    with gm.Mount(os.path.join(root, "model.gguf")) as inner:
        doc = load_json(inner.p("gguf.json"))
        tc.assertEqual(doc["file"], "model.gguf")
        tc.assertEqual(doc["version"], outer["version"])
        tc.assertEqual(doc["alignment"], outer["alignment"])
        want = [(k, v) for k, v in outer["metadata"].items() if k not in SPLIT_KEYS]
        tc.assertEqual(list(doc["metadata"].items()), want)
        tc.assertEqual([(t["name"], t["type"], t["dims"], t["size"]) for t in doc["tensors"]],
                       [(t["name"], t["type"], t["dims"], t["size"]) for t in outer["tensors"]])
        tc.assertTrue(all("shard" not in t for t in doc["tensors"]))
        for t in doc["tensors"]:
            tc.assertEqual(t["offset"] % doc["alignment"], 0, t["name"])
            tc.assertEqual(gm.read_file(inner.p(t["file"])),
                           gm.read_file(os.path.join(root, t["file"])), t["name"])
        inner_stderr = inner.stderr()
    return doc, inner_stderr
