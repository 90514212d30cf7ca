#!/bin/sh
# Installs OpenAI Codex's CLI (@openai/codex), whose `codex sandbox` is the
# second peer launcher `make bench` times beside sandbox-run, from the
# pinned scripts/codex/package-lock.json into a cache directory. npm picks
# the one platform package (the native binary, about 400 MB unpacked) that
# matches this machine.
#
#   scripts/install-codex.sh [DIR]      default DIR: .cache/codex
#
# Prints the path of the native codex binary on stdout (the npm package's
# bin/codex.js only starts it: the bench times the binary, without a
# Node.js start in front). Idempotent: a stamp holding the lockfile's
# digest skips the npm install when nothing changed. When run as root, the
# cache is made readable by everyone.
set -eu
cd "$(dirname "$0")/.."
src=scripts/codex
dir=${1:-.cache/codex}

case "$(uname -m)" in
x86_64) triple=x86_64-unknown-linux-musl pkg=codex-linux-x64 ;;
aarch64) triple=aarch64-unknown-linux-musl pkg=codex-linux-arm64 ;;
*)
	echo "install-codex: no codex package for $(uname -m); fix: run make bench on x86_64 or arm64" >&2
	exit 1
	;;
esac
bin="$dir/node_modules/@openai/$pkg/vendor/$triple/bin/codex"

if ! command -v npm >/dev/null 2>&1; then
	echo "install-codex: npm not found; fix: install Node.js 20 or newer (apt-get install -y nodejs npm)" >&2
	exit 1
fi

want=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)
stamp="$dir/.installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

echo "install-codex: installing the pinned codex into $dir" >&2
mkdir -p "$dir"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
# npm ci: exactly the lockfile, nothing newer; no install scripts run.
(cd "$dir" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
if [ ! -x "$bin" ]; then
	echo "install-codex: npm installed no $bin; fix: check that npm installs optional dependencies (--omit=optional unset)" >&2
	exit 1
fi
if [ "$(id -u)" = 0 ]; then
	chmod -R o+rX "$dir"
fi
echo "$want" >"$stamp"
echo "$bin"
