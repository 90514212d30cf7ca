#!/bin/sh
# make bench-startup: median start-up of `sandbox-run run -- true` against
# the same sandbox from raw bwrap (same namespaces, mounts and seccomp
# program), interleaved in one run. Prints ratios; asserts nothing. The full
# comparison, srt included, is `make bench` (scripts/bench.sh).
set -eu
cd "$(dirname "$0")/.."
mkdir -p .cache/bench
go build -o .cache/bench/sbx-bench ./scripts/bench
exec .cache/bench/sbx-bench -startup-only -bin "${1:-bin/sandbox-run}" -n "${N:-40}"
