#!/bin/sh
# The main job, end to end: a sandboxed command writes its workdir, fails to
# read $HOME, and the isolation summary says what held.
set -eu
bin=${1:-bin/sandbox-run}
work=$(mktemp -d /tmp/sandbox-run-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
# As root the sandbox runs as uid 65534, which must own its workdir.
[ "$(id -u)" = 0 ] && chown 65534:65534 "$work"
home=${HOME:-/root}
echo "== sandbox-run run --workdir $work -- sh -c '...'"
set +e
DEMO_HOST_SECRET=s3cret "$bin" run --workdir "$work" --summary --env GREETING=hello -- sh -c '
	echo "$GREETING from inside" > note.txt && echo "wrote $PWD/note.txt: $(cat note.txt)"
	if ls "$1" >/dev/null 2>&1; then echo "UNEXPECTED: read $1"; exit 1; fi
	echo "cannot read $1 (the host home): $(ls "$1" 2>&1)"
	env > "$TMPDIR/env.txt"
	# Every variable of the host, name and value, that also reached the
	# command, but for those sandbox-run sets itself and may happen to
	# equal the host'"'"'s: the policy'"'"'s PATH and LANG, and the offline
	# settings a run without egress gets (the report lists them).
	n=0
	while IFS= read -r kv; do
		case "$kv" in PATH=*|LANG=*|PIP_*|npm_config_*|UV_OFFLINE=*|CARGO_NET_OFFLINE=*|GOPROXY=*|GIT_TERMINAL_PROMPT=*|"") continue ;; esac
		grep -qxF -- "$kv" "$TMPDIR/env.txt" && n=$((n+1))
	done <<HOSTENV
$2
HOSTENV
	echo "host variables seen: $n of the host'"'"'s (expect 0); DEMO_HOST_SECRET: ${DEMO_HOST_SECRET:-absent}"
' demo "$home" "$(DEMO_HOST_SECRET=s3cret env)"
rc=$?
set -e
echo "== exit status $rc; on the host the workdir now holds: $(ls "$work")"
[ "$rc" = 0 ] || exit $rc
# An MCP server from a container image built here (skipped, with the
# reason, without podman or runsc).
"$(dirname "$0")/demo-image.sh" "$bin"
