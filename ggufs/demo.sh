#!/bin/bash
# The README's first command ends here: mount the bundled sample model, show the tree,
# a metadata file and a tensor read with numpy, then unmount.
# usage: demo.sh GGUFS MODEL.gguf
set -eu  # no pipefail: "| head" may cut a listing short on purpose
ggufs=$1
model=$2

mnt=$(mktemp -d /tmp/ggufs-demo.XXXXXX)
cleanup() {
	cd /
	fusermount3 -u "$mnt" 2>/dev/null || true
	rmdir "$mnt"
}
trap cleanup EXIT

# Prints a shell command as typed, then runs it.
show() {
	printf '\n$ %s\n' "$1"
	eval "$1"
}

printf '$ ggufs %s %s\n' "$model" "$mnt"
"$ggufs" "$model" "$mnt"
printf '$ cd %s\n' "$mnt"
cd "$mnt"
show 'ls -C'
show 'ls -l metadata | head -6'
show 'cat metadata/general.architecture'
show 'cat metadata/llama.attention.layer_norm_rms_epsilon'
show 'head -5 metadata/tokenizer.ggml.tokens'
show 'ls -l tensors | head -7'
show 'head -9 summary.txt'
show "/usr/bin/python3 -c 'import numpy
a = numpy.fromfile(\"tensors/output.weight.f32\", dtype=numpy.float32).reshape(8000, 256)
print(a.shape, a.dtype, a[0, :4])'"
printf '\n$ fusermount3 -u %s\n' "$mnt"
# where the command is, for what comes next
if installed=$(command -v ggufs); then
	printf '\nggufs is installed as %s (man ggufs; ggufs --help).\n' "$installed"
else
	printf '\nThe binary is %s; meson install -C build installs it and its man page.\n' "$ggufs"
fi
