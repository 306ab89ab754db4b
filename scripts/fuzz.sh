#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a short time each.
#
# A target fails when an input fails it: go test then writes the input to
# testdata/fuzz/<target>/ and we print where. Go 1.26's fuzz coordinator can
# also report "context deadline exceeded" at the -fuzztime boundary on a busy
# machine without any input having failed (go.dev/issue/75804, fixed in Go
# 1.27); such a run wrote no input, so it is run once more instead of failing
# the build. A worker stopped while minimizing (go.dev/issue/52569) writes an
# input that passes when run: that input is removed and the target run once
# more. Any other failure, or either race twice in a row, fails.
set -euo pipefail
time=${1:-5s}
cd "$(dirname "$0")/.."
out=$(mktemp)
replay=$(mktemp)
trap 'rm -f "$out" "$replay"' EXIT

inputs() { find "$1/testdata/fuzz/$2" -type f 2>/dev/null | sort || true; }

# replays reports whether every input file in $3 passes its target when run
# as a plain test (and was run: a pattern that matched nothing passes too):
# an input that really fails does not pass on replay.
replays() { # dir target files
	local f name
	for f in $3; do
		name=$(basename "$f")
		go test -count=1 -v -run="^$2\$/^${name}\$" "$1" >"$replay" 2>&1 || return 1
		grep -q -- "--- PASS: $2/$name " "$replay" || return 1
	done
}

fuzz() { # dir target
	local dir=$1 target=$2 before attempt
	for attempt in 1 2; do
		before=$(inputs "$dir" "$target")
		if go test -run='^$' -fuzz="^${target}\$" -fuzztime="$time" "$dir" >"$out" 2>&1; then
			return 0
		fi
		if [ "$(inputs "$dir" "$target")" = "$before" ] &&
			grep -q '^    context deadline exceeded$' "$out" && [ "$attempt" = 1 ]; then
			echo "  $target: Go's fuzz coordinator hit its own deadline race (go.dev/issue/75804), no input failed; running it again"
			continue
		fi
		local new
		new=$(comm -13 <(echo "$before") <(inputs "$dir" "$target"))
		if [ "$attempt" = 1 ] && [ -n "$new" ] &&
			grep -q 'fuzzing process hung or terminated unexpectedly while minimizing' "$out" &&
			replays "$dir" "$target" "$new"; then
			echo "  $target: a fuzz worker was stopped while minimizing (go.dev/issue/52569); the input it wrote passes when run, so it is removed and the target run again"
			echo "$new" | xargs rm -f
			continue
		fi
		cat "$out"
		echo "$new" | sed '/^$/d; s/^/  failing input written to /'
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
