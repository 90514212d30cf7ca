#!/bin/sh
# make test-vm: the kernel-level suites that need another kernel than the
# host's, run in a virtual machine that boots Debian's own kernel
# (linux-image-amd64, with Yama, AppArmor and Landlock built in) on a pure
# cgroup v2 hierarchy.
#
# What it does, in order:
#   1. installs qemu-system-x86 (apt, root only) when qemu-system-x86_64 is
#      missing, and downloads Debian's linux-image-amd64 kernel package and
#      busybox-static into .cache/vm (apt-get download; cached, extracted
#      there, nothing installed on the host);
#   2. builds bin/sandbox-run and the test binaries (go test -c) of the
#      suites below into .cache/vm/bin;
#   3. packs an initramfs: busybox, the 9p and virtio modules, a few /etc
#      files and scripts/vm/init, which becomes the VM's PID 1 on a tmpfs
#      root;
#   4. boots it under qemu-system-x86_64, KVM when a bounded probe shows it
#      works (on nested hosts /dev/kvm can exist and hang), TCG otherwise,
#      with the host's /usr and this tree shared read-only over 9p and
#      .cache/vm/out read-write for the results, under a wall-clock timeout
#      (VM_TIMEOUT seconds, default 900) after which qemu is killed;
#   5. prints one line per suite and exits non-zero if any suite failed, did
#      not run, ran no test, or the VM did not finish.
#
# The suites themselves are listed in scripts/vm/init (run_suite lines).
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
cache=$root/.cache/vm
timeout_s=${VM_TIMEOUT:-900}
count=${VM_COUNT:-1} # go test -count in the VM (flake hunting: VM_COUNT=5 VM_TIMEOUT=3600)
# The suites to run, a shell pattern on their names (VM_SUITES='landlock-*').
only=${VM_SUITES:-*}
mem=${VM_MEMORY:-2048}
export GOTOOLCHAIN=local
start_all=$(date +%s)

say() { echo "test-vm: $*" >&2; }
die() {
	say "$*"
	exit 1
}

case "$only" in *[!A-Za-z0-9*?_-]*) die "VM_SUITES=$only: use letters, digits, -, _, * and ? only (it goes on the kernel's command line)" ;; esac

mkdir -p "$cache/debs" "$cache/bin"

# 1. qemu, the kernel and busybox.
if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
	[ "$(id -u)" = 0 ] || die "qemu-system-x86_64 is missing; fix: as root run apt-get install -y --no-install-recommends qemu-system-x86"
	say "installing qemu-system-x86"
	apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null
fi

# deb_get PACKAGE: downloads PACKAGE's .deb into .cache/vm/debs once and
# prints its path.
deb_get() {
	f=$(ls "$cache/debs/$1"_*.deb 2>/dev/null | head -n 1 || true)
	if [ -z "$f" ]; then
		say "downloading $1"
		(cd "$cache/debs" && apt-get download -q "$1" >/dev/null 2>&1) ||
			{ apt-get update -qq >/dev/null 2>&1 || true; (cd "$cache/debs" && apt-get download -q "$1" >/dev/null); } ||
			die "cannot download $1; fix: apt-get update (as root) and check that Debian's archive is reachable"
		f=$(ls "$cache/debs/$1"_*.deb | head -n 1)
	fi
	echo "$f"
}

kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n 1)
if [ -z "$kpkg" ]; then
	# No package lists yet (a fresh machine): fetch them once.
	[ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 || true
	kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n 1)
fi
if [ -z "$kpkg" ]; then
	# Offline with a cache: the newest kernel package already downloaded.
	kpkg=$(ls "$cache/debs" 2>/dev/null | sed -n 's/^\(linux-image-[0-9][^_]*-amd64\)_.*/\1/p' | sort -V | tail -n 1)
fi
[ -n "$kpkg" ] || die "cannot resolve linux-image-amd64 to a kernel package; fix: apt-get update"
kver=${kpkg#linux-image-}
kdir=$cache/kernel-$kver
if [ ! -f "$kdir/boot/vmlinuz-$kver" ]; then
	deb=$(deb_get "$kpkg")
	rm -rf "$kdir.tmp"
	dpkg-deb -x "$deb" "$kdir.tmp"
	rm -rf "$kdir"
	mv "$kdir.tmp" "$kdir"
fi
bbdir=$cache/busybox
if [ ! -x "$bbdir/bin/busybox" ]; then
	deb=$(deb_get busybox-static)
	rm -rf "$bbdir"
	dpkg-deb -x "$deb" "$bbdir"
fi
bb=$bbdir/bin/busybox

# 2. The binaries. The suites run prebuilt test binaries: the VM emulates
# its CPU, where compiling would take most of the budget.
say "building sandbox-run and the test binaries"
make --no-print-directory build >/dev/null
cp bin/sandbox-run bin/sandbox-run-init "$cache/bin/"
for pkg in internal/limits e2e filter internal/connbroker; do
	mkdir -p "$(dirname "$cache/bin/$pkg.test")"
	go test -c -o "$cache/bin/$pkg.test" "./$pkg/"
done
chmod -R a+rX "$cache/bin"

# 3. The initramfs.
ird=$cache/initramfs
rm -rf "$ird"
mkdir -p "$ird/modules" "$ird/etc" "$ird/root" "$ird/home/sbxci"
cp "$bb" "$ird/busybox"
cp scripts/vm/init "$ird/init"
chmod 0755 "$ird/init" "$ird/busybox"
for d in bin sbin lib lib64; do ln -s "usr/$d" "$ird/$d"; done
mods=$kdir/lib/modules/$kver/kernel
# modload NAME: appends NAME's dependencies, then NAME, to the load order
# (read from the module's own .modinfo; the package ships no modules.dep).
modload() {
	grep -qx "$1" "$ird/modules/order" 2>/dev/null && return 0
	f=$(find "$mods" -name "$1.ko" | head -n 1)
	[ -n "$f" ] || die "kernel $kver has no module $1"
	for dep in $(tr '\0' '\n' <"$f" | sed -n 's/^depends=//p' | tr ',' ' '); do
		modload "$dep"
	done
	# Again: sh has no local variables, and the recursion reused f.
	f=$(find "$mods" -name "$1.ko" | head -n 1)
	cp "$f" "$ird/modules/"
	echo "$1" >>"$ird/modules/order"
}
: >"$ird/modules/order"
for m in virtio_pci 9pnet_virtio 9p; do modload "$m"; done
# Enough of /etc for the host's programs: users (root and the unprivileged
# sbxci), the dynamic linker's cache, name-service order and Debian's
# alternatives symlinks.
cat >"$ird/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
sbxci:x:1000:1000:sandbox-run ci:/home/sbxci:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
cat >"$ird/etc/group" <<'EOF'
root:x:0:
sbxci:x:1000:
nogroup:x:65534:
EOF
printf '127.0.0.1 localhost\n::1 localhost\n' >"$ird/etc/hosts"
printf 'passwd: files\ngroup: files\nhosts: files\n' >"$ird/etc/nsswitch.conf"
for f in ld.so.cache ld.so.conf services protocols; do
	[ -e "/etc/$f" ] && cp "/etc/$f" "$ird/etc/"
done
[ -d /etc/alternatives ] && cp -a /etc/alternatives "$ird/etc/"
(cd "$ird" && find . | "$bb" cpio -o -H newc 2>/dev/null | gzip -1) >"$cache/initramfs.gz"

# 4. Boot. KVM first when /dev/kvm is usable and a bounded probe sees the
# kernel print within 10 s; the verdict is kept per host boot.
accel=tcg
why="no usable /dev/kvm"
if [ -w /dev/kvm ]; then
	boot=$(cat /proc/sys/kernel/random/boot_id)
	verdict=$cache/kvm-verdict
	if [ "$(sed -n 1p "$verdict" 2>/dev/null)" != "$boot" ]; then
		probe_log=$cache/kvm-probe.log
		timeout -s KILL 10 qemu-system-x86_64 -accel kvm -m 256 -display none -monitor none -no-reboot \
			-serial "file:$probe_log" -kernel "$kdir/boot/vmlinuz-$kver" -append "console=ttyS0 panic=-1" \
			</dev/null >/dev/null 2>&1 || true
		if grep -q "Linux version" "$probe_log" 2>/dev/null; then
			printf '%s\nkvm\n' "$boot" >"$verdict"
		else
			printf '%s\ntcg\n' "$boot" >"$verdict"
		fi
	fi
	if [ "$(sed -n 2p "$verdict")" = kvm ]; then
		accel=kvm
	else
		why="/dev/kvm exists but a KVM guest printed nothing within 10 s (nested virtualisation without KVM support?)"
	fi
fi
if [ "$accel" = kvm ]; then
	say "accelerator: kvm"
	cpu=host
else
	say "accelerator: tcg (emulated, slow): $why"
	cpu=max
fi

out=$cache/out
rm -rf "$out"
mkdir -p "$out"
log=$cache/console.log
say "booting Debian's kernel $kver (timeout ${timeout_s}s, log $log)"
boot_start=$(date +%s)
set +e
# In the background so that a signal to this script reaches qemu: timeout
# passes TERM on to it.
timeout -s KILL "$timeout_s" qemu-system-x86_64 -accel "$accel" -cpu "$cpu" -smp 2 -m "$mem" \
	-display none -monitor none -no-reboot -serial "file:$log" \
	-kernel "$kdir/boot/vmlinuz-$kver" -initrd "$cache/initramfs.gz" \
	-append "console=ttyS0 panic=-1 quiet cgroup_no_v1=all VMLANE_SRC=$root VMLANE_OUT=/vmout VMLANE_COUNT=$count VMLANE_ONLY=$only" \
	-virtfs "local,path=/usr,mount_tag=usr,security_model=none,readonly=on" \
	-virtfs "local,path=$root,mount_tag=src,security_model=none,readonly=on" \
	-virtfs "local,path=$out,mount_tag=out,security_model=none" \
	</dev/null >/dev/null 2>&1 &
qpid=$!
trap 'kill -TERM $qpid 2>/dev/null; wait $qpid; exit 130' INT TERM HUP
wait $qpid
qrc=$?
trap - INT TERM HUP
set -e
boot_end=$(date +%s)

# 5. One line per suite.
fail=0
for s in $(cat "$out/suites" 2>/dev/null); do
	rc=$(cat "$out/$s.rc" 2>/dev/null || echo "none")
	secs=$(cat "$out/$s.secs" 2>/dev/null || echo "?")
	# Top-level tests only (no / in the name), wherever the line starts: a
	# test's own unbuffered output (a fork bomb's shell) can precede it.
	pass=$(grep -oE -- '--- PASS: [^ /]+ \(' "$out/$s.log" 2>/dev/null | wc -l)
	fl=$(grep -oE -- '--- FAIL: [^ /]+ \(' "$out/$s.log" 2>/dev/null | wc -l)
	skip=$(grep -oE -- '--- SKIP: [^ /]+ \(' "$out/$s.log" 2>/dev/null | wc -l)
	status=ok
	if [ "$rc" != 0 ]; then
		status="FAIL (exit $rc)"
	elif [ "${pass:-0}" = 0 ]; then
		status="FAIL (no test ran)"
	fi
	[ "$status" = ok ] || fail=1
	echo "vm: $s: $status: ${pass:-0} passed, ${fl:-0} failed, ${skip:-0} skipped in ${secs}s"
	if [ "$status" != ok ]; then
		grep -E -- '^(--- FAIL|\s+[a-z_]+_test\.go:[0-9]+:)' "$out/$s.log" 2>/dev/null | head -n 40 | sed 's/^/    /'
	fi
done
if ! grep -q '^vmlane: done' "$log" 2>/dev/null; then
	fail=1
	if [ "$qrc" = 137 ]; then
		say "the VM did not finish within ${timeout_s}s and was killed; last console lines:"
	else
		say "the VM stopped before its init finished (qemu exit $qrc); last console lines:"
	fi
	tail -n 30 "$log" | sed 's/^/    /' >&2
fi
[ -s "$out/suites" ] || { say "no suite ran"; fail=1; }
say "boot and suites took $((boot_end - boot_start))s, everything $(($(date +%s) - start_all))s ($accel)"
exit $fail
