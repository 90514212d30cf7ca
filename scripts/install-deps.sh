#!/bin/sh
# Installs what sandbox-run needs at run time with the system package
# manager, when it is missing: bubblewrap (tier 1) and gVisor's runsc
# (tier 2, --sandbox gvisor). Idempotent; prints what it does.
set -eu
missing=""
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
command -v runsc >/dev/null 2>&1 || missing="$missing runsc"
if [ -z "$missing" ]; then
	exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
		echo "install-deps:$missing missing and this user cannot install it; fix: as root run apt-get install -y$missing" >&2
		exit 1
	fi
fi
echo "install-deps: installing$missing" >&2
if command -v apt-get >/dev/null 2>&1; then
	$sudo apt-get update -qq >/dev/null
	# shellcheck disable=SC2086 # one word per package
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
elif command -v dnf >/dev/null 2>&1; then
	# Fedora packages no runsc: tier 2 stays unavailable (check says why).
	case "$missing" in *bubblewrap*) $sudo dnf install -y bubblewrap ;; esac
elif command -v apk >/dev/null 2>&1; then
	case "$missing" in *bubblewrap*) $sudo apk add bubblewrap ;; esac
else
	echo "install-deps: no known package manager; fix: install$missing by hand" >&2
	exit 1
fi
command -v bwrap >/dev/null
