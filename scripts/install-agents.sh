#!/bin/sh
# Installs the agents that sandbox-run's wrap and hook tests run for real:
# Claude Code (@anthropic-ai/claude-code, its native binary from the
# platform package npm picks) from the pinned scripts/agents/package-lock.json
# into DIR, and Codex through scripts/install-codex.sh (.cache/codex).
#
#   scripts/install-agents.sh [DIR]      default DIR: .cache/agents
#
# Idempotent: a stamp holding the lockfile's digest skips the npm install
# when nothing changed. No install scripts run (Claude Code's postinstall
# only copies the native binary the tests call directly). When run as
# root, the cache is made readable by everyone.
set -eu
cd "$(dirname "$0")/.."
src=scripts/agents
dir=${1:-.cache/agents}

scripts/install-codex.sh >/dev/null
want=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
stamp="$dir/.installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
echo "install-agents: installing the pinned Claude Code into $dir" >&2
mkdir -p "$dir"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
(cd "$dir" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
if ! ls "$dir"/node_modules/@anthropic-ai/claude-code-linux-*/claude >/dev/null 2>&1; then
	echo "install-agents: npm installed no native claude in $dir; fix: check that npm installs optional dependencies (--omit=optional unset)" >&2
	exit 1
fi
if [ "$(id -u)" = 0 ]; then
	chmod -R o+rX "$dir"
fi
echo "$want" >"$stamp"
