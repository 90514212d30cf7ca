#!/bin/sh
# Installs the real MCP servers the tests wrap (@modelcontextprotocol/
# server-filesystem and server-everything), and the MCP Inspector's CLI
# (inspector-cli, the HTTP client of the --listen tests), and the MCP
# conformance suite with tsx and cors for its reference server, into a cache directory that a
# sandbox may read, from the pinned scripts/mcp-servers/package-lock.json.
#
#   scripts/install-mcp-servers.sh [DIR]      default DIR: .cache/mcp
#
# Idempotent: a stamp holding the lockfile's digest skips the install when
# nothing changed. Run the servers as
#   node DIR/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
# (npx inside the sandbox would need the network). When run as root, the
# cache is made readable by everyone (the sandbox runs as uid 65534).
set -eu
cd "$(dirname "$0")/.."
src=scripts/mcp-servers
dir=${1:-.cache/mcp}

for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "install-mcp-servers: $tool not found; fix: install Node.js 20 or newer (apt-get install -y nodejs npm)" >&2
		exit 1
	fi
done
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
	echo "install-mcp-servers: node $(node --version) is too old; fix: install Node.js 20 or newer" >&2
	exit 1
fi

# The agents the wrap and hook tests run (Claude Code, Codex): their own
# pinned lockfiles and caches (scripts/install-agents.sh).
scripts/install-agents.sh

want=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
stamp="$dir/.installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
	[ -f "$dir/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" ] &&
	[ -f "$dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js" ] &&
	[ -f "$dir/node_modules/@modelcontextprotocol/inspector-cli/build/index.js" ] &&
	[ -f "$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js" ] &&
	[ -f "$dir/node_modules/tsx/package.json" ]; then
	exit 0
fi

echo "install-mcp-servers: installing pinned MCP servers into $dir" >&2
mkdir -p "$dir"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
# npm ci: exactly the lockfile, nothing newer; no install scripts run.
(cd "$dir" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
if [ "$(id -u)" = 0 ]; then
	chmod -R o+rX "$dir"
	# Every directory on the way must be searchable by the sandbox's uid.
	d=$(cd "$dir" && pwd)
	while [ "$d" != / ]; do
		d=$(dirname "$d")
		case $(stat -c %A "$d") in
		*x | *t) ;;
		*) echo "install-mcp-servers: $d is not searchable by other users, so a sandbox cannot reach $dir; fix: chmod o+x $d or pass another DIR" >&2 ;;
		esac
	done
fi
echo "$want" >"$stamp"
