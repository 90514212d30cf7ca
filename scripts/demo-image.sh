#!/bin/sh
# The image part of make demo: an MCP server in a container image built
# here (podman import: static busybox and the mcptest server, no registry),
# one tools/call through `sandbox-run mcp --image NAME@sha256:DIGEST`, and
# the .mcp.json entry with that digest. Needs podman and runsc (and a
# static /bin/busybox); make demo installs only what running needs, so
# without them this prints why and skips (exit 0). Leaves nothing behind
# but the image in podman's storage of the user running it.
set -eu
bin=${1:-bin/sandbox-run}
name=localhost/sandbox-run-demo-mcp:1
skip() { echo "== image demo skipped: $1 (fix: $2)"; exit 0; }
command -v podman >/dev/null 2>&1 || skip "no podman on PATH" "apt-get install -y podman, or make deps"
command -v runsc >/dev/null 2>&1 || [ -x /usr/local/bin/runsc ] || skip "no runsc (gVisor)" "make deps-run"
# Only a static busybox runs in an image without libc (ldd refuses it).
[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || skip "no static /bin/busybox" "apt-get install -y busybox-static, or make deps"
work=$(mktemp -d /tmp/sandbox-run-demo-image.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/root/bin" "$work/root/etc" "$work/root/usr/bin" "$work/wd" "$work/cache"
chmod 755 "$work" "$work/wd"; chmod 700 "$work/cache"
[ "$(id -u)" = 0 ] && chown 65534:65534 "$work/wd"
cp /bin/busybox "$work/root/bin/busybox"
for a in sh cat ls; do ln -s busybox "$work/root/bin/$a"; done
echo 'PRETTY_NAME="sandbox-run demo image (busybox)"' >"$work/root/etc/os-release"
CGO_ENABLED=0 go build -C "$(dirname "$0")/.." -o "$work/root/usr/bin/mcp-server" ./internal/mcptest/server
# The previous demo's image goes first: one image, never a pile of
# untagged ones.
podman rmi --force "$name" >/dev/null 2>&1 || true
tar -C "$work/root" -c . | podman import --quiet --change 'ENV PATH=/bin:/usr/bin' - "$name" >/dev/null ||
	skip "podman import failed for uid $(id -u)" "make podman work for this user (rootless: /etc/subuid, /etc/subgid, uidmap)"
digest=$(podman image inspect --format '{{.Digest}}' "$name")
ref="$name@$digest"
echo "== built $ref (podman import of static busybox and an MCP server)"
echo "== sandbox-run mcp --image $ref -- /usr/bin/mcp-server  (one tools/call)"
mkfifo "$work/in"
XDG_CACHE_HOME="$work/cache" "$bin" mcp --workdir "$work/wd" --image "$ref" -- /usr/bin/mcp-server <"$work/in" >"$work/out" 2>"$work/err" &
pid=$!
exec 3>"$work/in"
printf '%s\n' \
	'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}' \
	'{"jsonrpc":"2.0","method":"notifications/initialized"}' \
	'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from an image under gVisor"}}}' >&3
i=0
until grep -q '"id":2' "$work/out" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then break; fi
	sleep 0.1
done
exec 3>&-
rc=0
wait "$pid" || rc=$?
pid=
reply=$(grep '"id":2' "$work/out" || true)
if [ -z "$reply" ]; then
	echo "== image demo FAILED: no tools/call reply (exit $rc): $(tail -3 "$work/err")"
	exit 1
fi
echo "<- $reply"
echo "== in .mcp.json (Claude Code), with the digest podman gave this image:"
cat <<JSON
{"mcpServers": {"demo": {"command": "sandbox-run",
  "args": ["mcp", "--workdir", "/home/me/project", "--image", "$ref",
           "--", "/usr/bin/mcp-server"]}}}
JSON
