#!/bin/sh
# make bench-startup: median start-up of `sandbox-run run -- true` against
# the same sandbox from raw bwrap, interleaved in one run. Prints ratios;
# asserts nothing.
set -eu
cd "$(dirname "$0")/.."
exec go run ./scripts/benchstartup -bin "${1:-bin/sandbox-run}" -n "${N:-40}"
