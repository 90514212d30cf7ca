#!/bin/sh
# Installs what sandbox-run needs at run time with the system package
# manager, when it is missing: bubblewrap (tier 1) and gVisor's runsc
# (tier 2, --sandbox gvisor); and, on Debian and Ubuntu, what the container
# tests need (e2e/podman_kernel_linux_test.go): podman, runc (crun, podman's
# default runtime, refuses a hybrid cgroup hierarchy), uidmap (rootless
# podman), debootstrap (the container's root filesystem,
# scripts/container-rootfs.sh), busybox-static (the images the --image
# tests build with podman import) and python3-requests (the TLS tests).
# Idempotent; prints what it does. "install-deps.sh run" installs only
# what running needs (make demo); no argument, or "test", everything
# (make test, CI).
set -eu
mode=${1:-test}
case $mode in run | test) ;; *)
	echo "install-deps: unknown mode $mode; fix: pass run or test" >&2
	exit 2
	;;
esac
missing=""
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
command -v runsc >/dev/null 2>&1 || missing="$missing runsc"
testonly=""
if [ "$mode" = test ] && command -v apt-get >/dev/null 2>&1; then
	command -v podman >/dev/null 2>&1 || testonly="$testonly podman"
	command -v runc >/dev/null 2>&1 || testonly="$testonly runc"
	command -v debootstrap >/dev/null 2>&1 || testonly="$testonly debootstrap"
	command -v newuidmap >/dev/null 2>&1 || testonly="$testonly uidmap" # rootless podman
	[ -x /usr/sbin/sshd ] || testonly="$testonly openssh-server" # e2e TestSSHGitThroughAgent
	# The image tests' and make bench-image's image (podman import of it).
	dpkg -s busybox-static >/dev/null 2>&1 || testonly="$testonly busybox-static"
	# requests inside a sandbox trusts the run's CA (e2e/tls_kernel_linux_test.go)
	if [ -x /usr/bin/python3 ] && ! /usr/bin/python3 -c 'import requests' 2>/dev/null; then testonly="$testonly python3-requests"; fi
	# pip inside a sandbox trusts the run's CA (e2e/tls_kernel_linux_test.go)
	if [ -x /usr/bin/python3 ] && ! /usr/bin/python3 -m pip --version >/dev/null 2>&1; then testonly="$testonly python3-pip"; fi
fi
if [ -z "$missing$testonly" ]; then
	exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then sudo="sudo"; elif [ -n "$missing" ]; then
		echo "install-deps:$missing$testonly missing and this user cannot install it; fix: as root run apt-get install -y$missing$testonly" >&2
		exit 1
	else
		# Only the container tests need these: they say what is missing
		# (and fail under SANDBOX_REQUIRE=1); the rest can run.
		echo "install-deps:$testonly missing (the container tests need it); fix: as root run apt-get install -y$testonly" >&2
		exit 0
	fi
fi
missing="$missing$testonly"
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
