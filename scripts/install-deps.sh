#!/bin/sh
# Installs what sandbox-run needs at run time (bubblewrap) with the system
# package manager, when it is missing. Idempotent; prints what it does.
set -eu
if command -v bwrap >/dev/null 2>&1; then
	exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
		echo "install-deps: bubblewrap is missing and this user cannot install it; fix: as root run apt-get install -y bubblewrap" >&2
		exit 1
	fi
fi
echo "install-deps: installing bubblewrap" >&2
if command -v apt-get >/dev/null 2>&1; then
	$sudo apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq bubblewrap >/dev/null
elif command -v dnf >/dev/null 2>&1; then
	$sudo dnf install -y bubblewrap
elif command -v apk >/dev/null 2>&1; then
	$sudo apk add bubblewrap
else
	echo "install-deps: no known package manager; fix: install bubblewrap by hand" >&2
	exit 1
fi
command -v bwrap >/dev/null
