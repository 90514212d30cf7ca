#!/bin/sh
# Runs sandbox-run's escape matrix on a real Mac: the macOS tier 1
# (Seatbelt, sandbox-exec) against every case of egress-cases.json, each
# with its positive control.
#
# THIS SCRIPT HAS NOT BEEN RUN ON A MAC YET. The project had no Mac when it
# was written; the darwin code it exercises compiles and vets (GOOS=darwin
# in .ci/run) but has never executed. Expect the first run to find things;
# docs/seatbelt.md lists what is only reasoned and what to check first.
#
# Needs macOS with Go 1.26 (and git, for `go build` in a checkout). Run it
# from anywhere in the checkout, as your user, and again with sudo (as root
# the command runs as uid 65534, and the root-only cases apply):
#
#     scripts/test-macos.sh
#     sudo env "PATH=$PATH" scripts/test-macos.sh
#
# Steps, each recorded in the output directory it prints:
#   1. sw_vers, uname -m, the Go version;
#   2. build sandbox-run;
#   3. go test ./seatbelt/ ./check/ with SANDBOX_REQUIRE=1 (the profile's
#      golden files and fuzz seeds, and TestEscapeMatrixSeatbelt: every case
#      under Seatbelt, failing on any escape the matrix does not expect);
#   4. sandbox-run check --full --json: the environment probes, the whole
#      matrix, and the tier (1 only when every applicable case holds).
# Exit status: 0 when every step passed and check reported tier 1.
set -u
cd "$(dirname "$0")/.."

if [ "$(uname -s)" != Darwin ]; then
	echo "test-macos.sh: this is $(uname -s), not macOS; on Linux run make test" >&2
	exit 2
fi
command -v go >/dev/null 2>&1 || { echo "test-macos.sh: go not found (install Go 1.26)" >&2; exit 2; }

out=$(mktemp -d /tmp/sandbox-run-macos.XXXXXX)
status=0
echo "== results in $out"

{
	sw_vers
	echo "arch: $(uname -m)"
	echo "uid: $(id -u)"
	go version
	git rev-parse HEAD 2>/dev/null
} >"$out/host.txt" 2>&1
cat "$out/host.txt"

echo "== build"
if ! go build -o "$out/sandbox-run" ./cmd/sandbox-run >"$out/build.txt" 2>&1; then
	cat "$out/build.txt"
	echo "test-macos.sh: the build failed" >&2
	exit 1
fi

echo "== go test ./seatbelt/ ./check/ (SANDBOX_REQUIRE=1)"
if SANDBOX_REQUIRE=1 go test -count=1 -v ./seatbelt/ ./check/ >"$out/go-test.txt" 2>&1; then
	grep -E '^(ok|FAIL|---)|held, ' "$out/go-test.txt" | grep -v -- '--- PASS' | tail -40
else
	status=1
	grep -E '^(ok|FAIL)|--- FAIL|ESCAPED|could not run|but the matrix expects|held, ' "$out/go-test.txt" | tail -60
	echo "test-macos.sh: go test failed (full log: $out/go-test.txt)" >&2
fi

echo "== sandbox-run check --full --json"
"$out/sandbox-run" check --full --json >"$out/check.json" 2>"$out/check.stderr"
rc=$?
grep -m3 -E '"(tier|mechanism|verdict)"' "$out/check.json"
if [ "$rc" -ne 0 ]; then
	status=1
	echo "test-macos.sh: check exited $rc (1: below tier 1, 2: check could not run); see $out/check.json" >&2
fi

echo "== done: $out (host.txt, go-test.txt, check.json); please attach them to issue 9"
exit "$status"
