#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a short time each.
#
# A target fails when an input fails it: go test then writes the input to
# testdata/fuzz/<target>/ and we print where. Go 1.26's fuzz coordinator can
# also fail a target with a bare "context deadline exceeded" at the -fuzztime
# boundary without any input having failed (go.dev/issue/75804): it compares
# the deadline's error with its workers' context before the deadline has
# reached that context. Go 1.27 counts that as the normal end of the run; so
# does this script, when that line is the run's only failure and the run wrote
# no input (a failing input always writes one). A loaded CI machine hit the
# race twice in a row on one target, so running it again was not enough.
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

# onlyDeadlineRace reports whether the last run's failure was Go's fuzz
# coordinator reporting its own -fuzztime deadline: the lines between the
# target's "--- FAIL" and the package's "FAIL" say only that.
onlyDeadlineRace() { # target
	[ "$(sed -n "/^--- FAIL: $1 /,/^FAIL\$/p" "$out" | sed '1d;$d')" = "    context deadline exceeded" ]
}

fuzz() { # dir target
	local dir=$1 target=$2 before
	before=$(inputs "$dir" "$target")
	rm -f "$workers"/*
	if go test -run='^$' -fuzz="^${target}\$" -fuzztime="$time" "$dir" >"$out" 2>&1; then
		return 0
	fi
	if [ "$(inputs "$dir" "$target")" = "$before" ] && onlyDeadlineRace "$target"; then
		echo "  $target: fuzzed for $time, no input failed; Go's fuzz coordinator then reported its own deadline (go.dev/issue/75804): passed"
		return 0
	fi
	cat "$out"
	workerOutput
	comm -13 <(echo "$before") <(inputs "$dir" "$target") | sed 's/^/  failing input written to /'
	return 1
}

grep -rl --include='*_test.go' --exclude-dir=node_modules '^func Fuzz' . | sort | while read -r file; do
	dir=$(dirname "$file")
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //' | while read -r target; do
		echo "fuzz $dir $target ($time)"
		fuzz "$dir" "$target"
	done
done
