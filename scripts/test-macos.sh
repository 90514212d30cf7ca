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
# from anywhere in the checkout, as your user, and again as root with
# sudo -H (as root the command runs as uid 65534, and the root-only cases
# apply; -H gives root its own HOME, so that its Go caches are not
# root-owned files in your ~/Library/Caches/go-build):
#
#     scripts/test-macos.sh [OUTDIR]
#     sudo -H env "PATH=$PATH" scripts/test-macos.sh [OUTDIR]
#
# OUTDIR is where the results go; it is created, and must be empty if it
# exists. Without it, a new directory under /tmp. .github/workflows/macos.yml
# runs both on GitHub's macOS runners and uploads OUTDIR.
#
# Steps, each recorded in the output directory it prints:
#   1. sw_vers, uname -m, the Go version;
#   2. build sandbox-run;
#   3. go test ./seatbelt/ ./internal/check/ ./internal/matrix/ with SANDBOX_REQUIRE=1 (the profile's
#      golden files and fuzz seeds, and TestEscapeMatrixSeatbelt: every case
#      under Seatbelt, failing on any escape the matrix does not expect),
#      and the sandbox package's reachability test;
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

if [ "$(id -u)" = 0 ]; then
	# sudo without -H keeps the caller's HOME on macOS: go would write
	# root-owned files into the caller's build and module caches.
	home_owner=$(stat -f %u "${HOME:-/}" 2>/dev/null || echo unknown)
	if [ "$home_owner" != 0 ]; then
		echo "test-macos.sh: running as root with HOME=$HOME (owner uid $home_owner): use sudo -H so that Go's caches are root's own" >&2
		exit 2
	fi
fi

if [ $# -gt 1 ]; then
	echo "usage: test-macos.sh [OUTDIR]" >&2
	exit 2
fi
if [ $# -eq 1 ]; then
	out=$1
	if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
		echo "test-macos.sh: $out exists and is not empty; name a new or empty directory" >&2
		exit 2
	fi
	mkdir -p "$out" || { echo "test-macos.sh: cannot create $out" >&2; exit 2; }
	out=$(cd "$out" && pwd -P)
else
	out=$(mktemp -d /tmp/sandbox-run-macos.XXXXXX)
fi
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

echo "== go test ./seatbelt/ ./internal/check/ ./internal/matrix/ (SANDBOX_REQUIRE=1)"
if SANDBOX_REQUIRE=1 go test -count=1 -v ./seatbelt/ ./internal/check/ >"$out/go-test.txt" 2>&1 &&
	SANDBOX_REQUIRE=1 go test -count=1 -v -run 'TestReachableAs' ./sandbox/ >>"$out/go-test.txt" 2>&1; then
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

echo "== done: $out (host.txt, go-test.txt, check.json); please attach them to issue 22"
exit "$status"
