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

# died_not_failed reports whether the engine stopped because a worker
# process ended unexpectedly (killed from outside, as by a machine's
# memory or process limits while other lanes run) and not because the
# target failed: the input it was running then passes when replayed.
died_not_failed() {
	printf '%s' "$1" | grep -q 'fuzzing process hung or terminated unexpectedly' || return 1
	[ -n "$4" ] && [ -f "$2/$4" ] || return 1
	id=$(basename "$4")
	for _ in 1 2 3; do
		go test -count=1 -run "^$3/$id\$" "$2" >/dev/null 2>&1 || return 1
	done
}

for t in $(scripts/fuzz-targets.sh); do
	pkg=${t%%:*}; name=${t##*:}
	echo "fuzz $pkg $name ($time)"
	out=$(go test -run '^$' -fuzz "^$name\$" -fuzztime "$time" "$pkg" 2>&1)
	rc=$?
	printf '%s\n' "$out" | tail -3
	if [ $rc -ne 0 ]; then
		if printf '%s' "$out" | grep -q 'Failing input written to'; then
			# The failure and the input itself: CI's clone, where the
			# engine wrote it, is gone after the run.
			printf '%s\n' "$out" | grep -v '^fuzz: elapsed' | sed -n '/--- FAIL/,$p' | head -40
			f=$(printf '%s\n' "$out" | sed -n 's/.*Failing input written to \(.*\)$/\1/p' | head -1)
			[ -n "$f" ] && [ -f "$pkg/$f" ] && { echo "== $pkg$f"; head -c 2000 "$pkg/$f"; echo; }
			if died_not_failed "$out" "$pkg" "$name" "$f"; then
				echo "fuzz $name: the engine's worker process died (above), and the input it held passes when replayed 3 times: not a finding in the code under test"
				rm -f "$pkg/$f"
			else
				echo "fuzz $name: FAILED with a failing input (see above)"
				status=1
			fi
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
