#!/bin/sh
# Usage: tests/fuzz/run.sh SECONDS
#
# Builds the libFuzzer target with clang in its own build directory (build-fuzz, or
# $FUZZ_BUILD_DIR), fuzzes gguf_parse for SECONDS on a scratch copy of the seed corpus
# (tests/fuzz/corpus/ stays as committed), and fails if anything was found: each crash,
# leak, timeout or OOM input is copied into tests/fuzz/regressions/, which the normal
# test suite replays (meson test fuzz-replay). FUZZ_JOBS=N runs N fuzzers in parallel.
set -eu

secs=${1:?usage: $0 SECONDS}
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${FUZZ_BUILD_DIR:-$src/build-fuzz}
jobs=${FUZZ_JOBS:-1}
# the parallel run changes directory: keep the build directory absolute
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac

if [ ! -f "$build/build.ninja" ]; then
	CC=clang meson setup "$build" "$src" -Dfuzz=true -Dbuildtype=debugoptimized
fi
ninja -C "$build" tests/fuzz/fuzz_parse

work=$(mktemp -d "${TMPDIR:-/tmp}/ggufs-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/corpus" "$work/artifacts"
cp "$src"/tests/fuzz/corpus/* "$work/corpus/"

status=0
# -jobs/-workers: every worker writes its own log and shares the corpus directory
if [ "$jobs" -gt 1 ]; then
	(cd "$work" && "$build/tests/fuzz/fuzz_parse" -max_total_time="$secs" -max_len=65536 \
		-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work/artifacts/" -jobs="$jobs" -workers="$jobs" \
		"$work/corpus") || status=$?
	grep -HE '^(stat::|Done|==[0-9]+==ERROR|SUMMARY)' "$work"/fuzz-*.log || true
else
	"$build/tests/fuzz/fuzz_parse" -max_total_time="$secs" -max_len=65536 \
		-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work/artifacts/" "$work/corpus" || status=$?
fi

found=0
for f in "$work"/artifacts/*; do
	[ -e "$f" ] || continue
	cp "$f" "$src/tests/fuzz/regressions/"
	echo "run.sh: finding saved as tests/fuzz/regressions/$(basename "$f")" >&2
	found=$((found + 1))
done
if [ "$found" -gt 0 ] || [ "$status" -ne 0 ]; then
	echo "run.sh: the fuzzer failed (exit $status, $found input(s) saved)" >&2
	exit 1
fi
echo "run.sh: no findings in $secs s"
