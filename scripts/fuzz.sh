#!/bin/sh
# Runs every fuzz target (scripts/fuzz-targets.sh) for FUZZTIME each.
# A target fails the run when the fuzzer found a failing input. Go's
# fuzzing engine sometimes ends a clean run with "context deadline
# exceeded" when fuzztime runs out while a worker is busy (it writes no
# failing input then); that is reported and not counted as a failure.
set -u
cd "$(dirname "$0")/.."
time=${FUZZTIME:-20s}
status=0
for t in $(scripts/fuzz-targets.sh); do
	pkg=${t%%:*}; name=${t##*:}
	echo "fuzz $pkg $name ($time)"
	out=$(go test -run '^$' -fuzz "^$name\$" -fuzztime "$time" "$pkg" 2>&1)
	rc=$?
	printf '%s\n' "$out" | tail -3
	if [ $rc -ne 0 ]; then
		if printf '%s' "$out" | grep -q 'Failing input written to'; then
			echo "fuzz $name: FAILED with a failing input (see above)"
			status=1
		elif printf '%s' "$out" | grep -q 'context deadline exceeded'; then
			echo "fuzz $name: the engine stopped with 'context deadline exceeded' and no failing input: not a finding"
		else
			# No failing input: show what the engine and TestMain said.
			printf '%s\n' "$out" | grep -v '^fuzz: elapsed' | tail -40
			echo "fuzz $name: FAILED"
			status=1
		fi
	fi
done
exit $status
