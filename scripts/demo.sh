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
"$bin" run --workdir "$work" --summary --env GREETING=hello -- sh -c '
	echo "$GREETING from inside" > note.txt && echo "wrote $PWD/note.txt: $(cat note.txt)"
	if ls "$1" >/dev/null 2>&1; then echo "UNEXPECTED: read $1"; exit 1; fi
	echo "cannot read $1 (the host home): $(ls "$1" 2>&1)"
	echo "host variables seen: $(env | grep -c -v -E "^(GREETING|HOME|PATH|TMPDIR|LANG|PWD|SHLVL|_)=") (expect 0)"
' demo "$home"
rc=$?
set -e
echo "== exit status $rc; on the host the workdir now holds: $(ls "$work")"
exit $rc
