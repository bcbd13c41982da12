#!/bin/sh
# Usage: tests/fuzz/run.sh SECONDS
#
# Builds the libFuzzer targets with clang in their own build directory (build-fuzz, or
# $FUZZ_BUILD_DIR) and fuzzes each for SECONDS, one after the other, on a scratch copy
# of its seed corpus (committed corpora stay as they are):
#   fuzz_parse  gguf_parse and the whole in-memory tree   corpus/        regressions/
#   fuzz_edits  the edits file, metadata text, file names corpus_edits/  regressions_edits/
#   fuzz_hub    the hub's tree page and Link header      corpus_hub/    regressions_hub/
#   fuzz_s3     S3's ListObjectsV2 page and error body    corpus_s3/     regressions_s3/
#   fuzz_imatrix an importance matrix file (GGUF, .dat)  corpus_imatrix/ regressions_imatrix/
#   fuzz_st_header a .safetensors file's header         corpus_st_header/ regressions_st_header/
#   fuzz_st_spm a sentencepiece tokenizer.model          corpus_st_spm/ regressions_st_spm/
#   fuzz_recipes a recipe file (-o recipes)              corpus_recipes/ regressions_recipes/
# The listings' two small parsers, the importance matrix's, the safetensors ones and
# the recipe file's get half the time each (LISTING_SECS, default SECONDS/2):
# their inputs are short and their state small, so they saturate sooner.
# It fails if anything was found: each crash, leak, timeout or OOM input is copied into
# the target's regressions folder, which the normal test suite replays (meson test
# fuzz-parse, fuzz-edits, ...). FUZZ_JOBS=N runs N fuzzers of a target in parallel.
set -eu

all_secs=${1:?usage: $0 SECONDS}
listing_secs=${LISTING_SECS:-$((all_secs / 2))}
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${FUZZ_BUILD_DIR:-$src/build-fuzz}
jobs=${FUZZ_JOBS:-1}
# the parallel run changes directory: keep the build directory absolute
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac

if [ ! -f "$build/build.ninja" ]; then
	CC=clang meson setup "$build" "$src" -Dfuzz=true -Dbuildtype=debugoptimized
fi
ninja -C "$build" tests/fuzz/fuzz_parse tests/fuzz/fuzz_edits tests/fuzz/fuzz_hub tests/fuzz/fuzz_s3 \
	tests/fuzz/fuzz_imatrix tests/fuzz/fuzz_st_header tests/fuzz/fuzz_st_spm tests/fuzz/fuzz_recipes

work=$(mktemp -d "${TMPDIR:-/tmp}/ggufs-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

failed=0

# fuzz TARGET CORPUS REGRESSIONS [SECS]: SECS (default SECONDS) of TARGET from
# tests/fuzz/CORPUS, its findings saved in tests/fuzz/REGRESSIONS. Sets failed=1 on a
# finding or a failure.
fuzz() {
	target=$1
	secs=${4:-$all_secs}
	dir="$work/$target"
	mkdir "$dir" "$dir/corpus" "$dir/artifacts"
	cp "$src/tests/fuzz/$2"/* "$dir/corpus/"
	status=0
	# -jobs/-workers: every worker writes its own log and shares the corpus directory
	if [ "$jobs" -gt 1 ]; then
		(cd "$dir" && "$build/tests/fuzz/$target" -max_total_time="$secs" -max_len=65536 \
			-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
			-artifact_prefix="$dir/artifacts/" -jobs="$jobs" -workers="$jobs" \
			"$dir/corpus") || status=$?
		grep -HE '^(stat::|Done|==[0-9]+==ERROR|SUMMARY)' "$dir"/fuzz-*.log || true
	else
		"$build/tests/fuzz/$target" -max_total_time="$secs" -max_len=65536 \
			-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
			-artifact_prefix="$dir/artifacts/" "$dir/corpus" || status=$?
	fi
	found=0
	for f in "$dir"/artifacts/*; do
		[ -e "$f" ] || continue
		mkdir -p "$src/tests/fuzz/$3"
		cp "$f" "$src/tests/fuzz/$3/"
		echo "run.sh: $target: finding saved as tests/fuzz/$3/$(basename "$f")" >&2
		found=$((found + 1))
	done
	if [ "$found" -gt 0 ] || [ "$status" -ne 0 ]; then
		echo "run.sh: $target failed (exit $status, $found input(s) saved)" >&2
		failed=1
	else
		echo "run.sh: $target: no findings in $secs s"
	fi
}

fuzz fuzz_parse corpus regressions
fuzz fuzz_edits corpus_edits regressions_edits
fuzz fuzz_hub corpus_hub regressions_hub "$listing_secs"
fuzz fuzz_s3 corpus_s3 regressions_s3 "$listing_secs"
fuzz fuzz_imatrix corpus_imatrix regressions_imatrix "$listing_secs"
fuzz fuzz_st_header corpus_st_header regressions_st_header "$listing_secs"
fuzz fuzz_st_spm corpus_st_spm regressions_st_spm "$listing_secs"
fuzz fuzz_recipes corpus_recipes regressions_recipes "$listing_secs"
exit "$failed"
