#!/bin/sh
# Lists every fuzz target as package:FuzzName, for `make fuzz`.
cd "$(dirname "$0")/.."
git grep -l '^func Fuzz' -- '*_test.go' 2>/dev/null | while read -r f; do
	for n in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$f"); do
		echo "./$(dirname "$f")/:$n"
	done
done
