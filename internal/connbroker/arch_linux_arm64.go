package connbroker

import "golang.org/x/sys/unix"

const nativeArch = unix.AUDIT_ARCH_AARCH64
