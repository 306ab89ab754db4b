#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a short time each.
#
# A target fails when an input fails it: go test then writes the input to
# testdata/fuzz/<target>/ and we print where. Go 1.26's fuzz coordinator can
# also report "context deadline exceeded" at the -fuzztime boundary on a busy
# machine without any input having failed (go.dev/issue/75804, fixed in Go
# 1.27); such a run wrote no input, so it is run once more instead of failing
# the build. Any other failure, or the race twice in a row, fails.
#
# go test discards a fuzz worker's output, so a panic on any goroutine but
# the target's shows only as "fuzzing process hung or terminated
# unexpectedly", with an input that may pass when run alone. Every fuzz test
# calls fuzzworker.Capture, which sends a worker's output to a file under
# IOA_FUZZ_WORKER_LOG; a failing target's files are printed with its output.
set -euo pipefail
time=${1:-5s}
cd "$(dirname "$0")/.."
out=$(mktemp)
workers=$(mktemp -d)
trap 'rm -rf "$out" "$workers"' EXIT
export IOA_FUZZ_WORKER_LOG=$workers/worker

inputs() { find "$1/testdata/fuzz/$2" -type f 2>/dev/null | sort || true; }

# workerOutput prints what the fuzz workers of the last run printed (the
# last 80 lines of each), such as a panic that killed one.
workerOutput() {
	local f
	for f in "$workers"/*; do
		[ -s "$f" ] || continue
		echo "  output of fuzz worker ${f##*.}:"
		tail -n 80 "$f" | sed 's/^/    /'
	done
}

fuzz() { # dir target
	local dir=$1 target=$2 before attempt
	for attempt in 1 2; do
		before=$(inputs "$dir" "$target")
		rm -f "$workers"/*
		if go test -run='^$' -fuzz="^${target}\$" -fuzztime="$time" "$dir" >"$out" 2>&1; then
			return 0
		fi
		if [ "$(inputs "$dir" "$target")" = "$before" ] &&
			grep -q '^    context deadline exceeded$' "$out" && [ "$attempt" = 1 ]; then
			echo "  $target: Go's fuzz coordinator hit its own deadline race (go.dev/issue/75804), no input failed; running it again"
			continue
		fi
		cat "$out"
		workerOutput
		comm -13 <(echo "$before") <(inputs "$dir" "$target") | sed 's/^/  failing input written to /'
		return 1
	done
}

grep -rl --include='*_test.go' --exclude-dir=node_modules '^func Fuzz' . | sort | while read -r file; do
	dir=$(dirname "$file")
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //' | while read -r target; do
		echo "fuzz $dir $target ($time)"
		fuzz "$dir" "$target"
	done
done
