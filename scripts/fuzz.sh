#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a short time each.
set -euo pipefail
time=${1:-5s}
cd "$(dirname "$0")/.."
grep -rl --include='*_test.go' --exclude-dir=node_modules '^func Fuzz' . | sort | while read -r file; do
	dir=$(dirname "$file")
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //' | while read -r target; do
		echo "fuzz $dir $target ($time)"
		go test -run='^$' -fuzz="^${target}\$" -fuzztime="$time" "$dir" >/dev/null
	done
done
