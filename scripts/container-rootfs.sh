#!/bin/sh
# Prints the path of a minimal Debian root filesystem for the container
# tests (e2e/podman_kernel_linux_test.go), building it first when it is
# not cached: debootstrap --variant=minbase of Debian bookworm from
# deb.debian.org, plus bubblewrap (what sandbox-run's default mechanism
# runs inside the container).
#
# The cache is .cache/rootfs/<suite>-<key>, where key is the first 12 hex
# digits of the SHA-256 of the recipe line below (suite, variant, mirror,
# extra packages, recipe version): change any of them and a new directory
# is built; the old one stays until `make clean` (or rm -rf .cache/rootfs).
# A build takes about a minute (52 s here) and needs root (debootstrap
# makes device nodes and chowns); it is done in a temporary directory and
# renamed into place only when complete, so an interrupted build is never
# used. Reading a built rootfs needs no privileges: an unprivileged user's
# rootless podman runs it as it is (CI copies root's cache into its
# user's clone).
#
# ROOTFS_CACHE overrides the cache directory (default .cache/rootfs of
# this tree).
set -eu
cd "$(dirname "$0")/.."
suite=bookworm
variant=minbase
mirror=http://deb.debian.org/debian
include=bubblewrap
# v2: the mount points podman binds are made in the tree (see below).
recipe="v2 suite=$suite variant=$variant mirror=$mirror include=$include"
key=$(printf '%s\n' "$recipe" | sha256sum | cut -c1-12)
cache=${ROOTFS_CACHE:-$(pwd)/.cache/rootfs}
dir=$cache/$suite-$key

say() { echo "container-rootfs: $*" >&2; }

if [ -f "$dir/.complete" ]; then
	echo "$dir"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	say "$dir is not built and building it needs root; fix: as root run scripts/container-rootfs.sh (make container-rootfs)"
	exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
	say "installing debootstrap"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
fi
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
say "building $dir ($recipe); takes a few minutes, once"
start=$(date +%s)
if ! debootstrap --variant="$variant" --include="$include" "$suite" "$tmp/root" "$mirror" >"$tmp/log" 2>&1; then
	tail -n 20 "$tmp/log" >&2
	rm -f "$tmp/log"
	say "debootstrap failed; fix: check that $mirror is reachable"
	exit 1
fi
rm -f "$tmp/log"
# Apt's caches are not needed to run anything.
rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*
# Rootless podman (the tests as an unprivileged user) cannot create
# anything in this root-owned tree, not even in its overlay (:O): the
# files and directories it binds over must exist. Podman's own (mtab,
# hosts, .containerenv) and the tests' (the binary under test, /job, /out).
ln -sf ../proc/self/mounts "$tmp/root/etc/mtab"
touch "$tmp/root/etc/hosts" "$tmp/root/run/.containerenv" "$tmp/root/usr/local/bin/sandbox-run"
mkdir -p "$tmp/root/job" "$tmp/root/out"
printf '%s\n' "$recipe" >"$tmp/root/.complete"
if [ -f "$dir/.complete" ]; then
	say "a parallel build finished first; using it"
else
	rm -rf "$dir"
	mv "$tmp/root" "$dir"
fi
say "built in $(($(date +%s) - start)) s"
echo "$dir"
