#!/bin/sh
# Installs Anthropic's sandbox-runtime (srt), the peer launcher `make bench`
# compares sandbox-run against, from the pinned scripts/srt/package-lock.json
# into a cache directory, and the tools srt needs on Linux (socat, ripgrep)
# through apt when they are missing.
#
#   scripts/install-srt.sh [DIR]      default DIR: .cache/srt
#
# Prints the path of srt's CLI (DIR/node_modules/@anthropic-ai/
# sandbox-runtime/dist/cli.js) on stdout. Idempotent: a stamp holding the
# lockfile's digest skips the npm install when nothing changed. When run as
# root, the cache is made readable by everyone.
set -eu
cd "$(dirname "$0")/.."
src=scripts/srt
dir=${1:-.cache/srt}
cli="$dir/node_modules/@anthropic-ai/sandbox-runtime/dist/cli.js"

for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "install-srt: $tool not found; fix: install Node.js 20 or newer (apt-get install -y nodejs npm)" >&2
		exit 1
	fi
done

missing=
command -v socat >/dev/null 2>&1 || missing="$missing socat"
command -v rg >/dev/null 2>&1 || missing="$missing ripgrep"
if [ -n "$missing" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "install-srt: installing$missing (srt needs them on Linux)" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >&2 ||
			{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >&2; }
	else
		echo "install-srt: srt needs$missing; fix: apt-get install -y$missing (as root)" >&2
		exit 1
	fi
fi

want=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
stamp="$dir/.installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$cli" ]; then
	echo "$cli"
	exit 0
fi

echo "install-srt: installing the pinned srt into $dir" >&2
mkdir -p "$dir"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
# npm ci: exactly the lockfile, nothing newer; no install scripts run.
(cd "$dir" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
if [ "$(id -u)" = 0 ]; then
	chmod -R o+rX "$dir"
fi
echo "$want" >"$stamp"
echo "$cli"
