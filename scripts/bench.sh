#!/bin/sh
# make bench / make bench-quick: sandbox-run against raw bubblewrap, srt and
# codex sandbox, in interleaved runs; writes docs/BENCHMARKS.md. Asserts
# nothing.
#
#   scripts/bench.sh [BIN [FLAGS...]]     BIN default: bin/sandbox-run
#   scripts/bench.sh bin/sandbox-run -quick
#
# Installs srt (scripts/install-srt.sh, into .cache/srt) and codex
# (scripts/install-codex.sh, into .cache/codex) first; if either fails, the
# report says why and has no row for it. The network sections
# need root (network namespaces). FLAGS go to scripts/bench (see its doc).
set -eu
cd "$(dirname "$0")/.."
bin=${1:-bin/sandbox-run}
[ $# -gt 0 ] && shift

log=$(mktemp)
micro=$(mktemp)
trap 'rm -f "$log" "$micro"' EXIT INT TERM

if srt=$(scripts/install-srt.sh 2>"$log"); then
	srt_err=
else
	cat "$log" >&2
	srt=
	srt_err="scripts/install-srt.sh failed: $(tail -n 3 "$log" | tr '\n' ' ')"
fi

if codex=$(scripts/install-codex.sh 2>"$log"); then
	codex_err=
else
	cat "$log" >&2
	codex=
	codex_err="scripts/install-codex.sh failed: $(tail -n 3 "$log" | tr '\n' ' ')"
fi

mkdir -p .cache/bench
go build -o .cache/bench/sbx-bench ./scripts/bench

benchtime=1s
case " $* " in *" -quick "*) benchtime=100ms ;; esac
echo "bench: go test -bench (benchtime $benchtime)" >&2
go test -run '^$' -bench . -benchmem -benchtime "$benchtime" \
	./filter/ ./bwrap/ ./pathguard/ ./forwarder/ ./sandbox/ ./scripts/bench/ 2>&1 |
	grep -E '^(Benchmark|goos|goarch|cpu|pkg|ok|FAIL|---)' >"$micro" || true

# Not exec: the shell stays to remove $log and $micro (its EXIT trap).
status=0
.cache/bench/sbx-bench -bin "$bin" -srt "$srt" -srt-error "$srt_err" -codex "$codex" -codex-error "$codex_err" -micro "$micro" "$@" || status=$?
exit $status
