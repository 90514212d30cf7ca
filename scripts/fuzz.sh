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

# replay runs the failing input $3 of target $2 in package $1 once more,
# alone, and says how it went and how long it took: the engine's worker
# panics without a word when one input takes more than 10 s (Go's
# internal/fuzz), and reports only "fuzzing process hung or terminated
# unexpectedly: exit status 2", so a slow input shows here as a long pass.
replay() {
	[ -n "$3" ] && [ -f "$1/$3" ] || return 0
	start=$(date +%s%N)
	if go test -count=1 -run "^$2/$(basename "$3")\$" "$1" >/dev/null 2>&1; then r=passes; else r=fails; fi
	echo "replayed alone, the input $r in $(( ($(date +%s%N) - start) / 1000000 )) ms (the engine allows 10000 ms per input)"
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
			printf '%s\n' "$out" | grep -v '^fuzz: elapsed' | head -60
			f=$(printf '%s\n' "$out" | sed -n 's/.*Failing input written to \(.*\)$/\1/p' | head -1)
			[ -n "$f" ] && [ -f "$pkg/$f" ] && { echo "== $pkg$f"; head -c 2000 "$pkg/$f"; echo; }
			replay "$pkg" "$name" "$f"
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
