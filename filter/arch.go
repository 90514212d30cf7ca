package filter

//go:generate go run ./internal/mksysnum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// ErrUnsupportedArch is wrapped by every error that NativeArch and Assemble
// return for an architecture this package has no syscall table for. The
// launcher must refuse tier 1 (exit 125) on it: running without the filter
// is never the fallback.
var ErrUnsupportedArch = errors.New("filter: unsupported architecture")

// Arch is a seccomp architecture: the AUDIT_ARCH_* value the kernel puts in
// seccomp_data.arch, and the syscall table that goes with it. The zero value
// is not an architecture.
type Arch int

// The architectures Assemble can build programs for, whatever GOARCH the
// running binary has.
const (
	ArchX86_64  Arch = iota + 1 // AUDIT_ARCH_X86_64, the 64-bit x86 ABI
	ArchAArch64                 // AUDIT_ARCH_AARCH64, the 64-bit Arm ABI
)

// String returns the kernel's name for a: "x86_64" or "aarch64", or
// "Arch(N)" for a value that is not an architecture.
func (a Arch) String() string {
	if info, ok := infoOf(a); ok {
		return info.name
	}
	return fmt.Sprintf("Arch(%d)", int(a))
}

// NativeArch returns the architecture of the running binary. It returns an
// error wrapping ErrUnsupportedArch when GOOS is not linux (seccomp does not
// exist there) or GOARCH is neither amd64 nor arm64.
func NativeArch() (Arch, error) {
	return archFor(runtime.GOOS, runtime.GOARCH)
}

func archFor(goos, goarch string) (Arch, error) {
	if goos != "linux" {
		return 0, fmt.Errorf("filter: seccomp needs linux, this is %s/%s: %w", goos, goarch, ErrUnsupportedArch)
	}
	switch goarch {
	case "amd64":
		return ArchX86_64, nil
	case "arm64":
		return ArchAArch64, nil
	}
	return 0, fmt.Errorf("filter: no syscall table for linux/%s (only amd64 and arm64): %w", goarch, ErrUnsupportedArch)
}

// x32SyscallBit is __X32_SYSCALL_BIT from arch/x86/include/uapi/asm/unistd.h.
// x/sys does not define it. Every x32 syscall number has it set.
const x32SyscallBit = 0x40000000

// archInfo is everything about an architecture the assembler needs. The
// tables are generated (zsysnum.go) and never modified.
type archInfo struct {
	name      string
	auditArch uint32
	// killX32 kills any syscall number with x32SyscallBit set. The x32 ABI
	// shares AUDIT_ARCH_X86_64 with x86_64 but has its own numbers, so the
	// arch check alone cannot catch it.
	killX32 bool
	// order is the byte order of seccomp_data and of struct sock_filter:
	// the kernel's own. Both supported architectures are little-endian, so
	// the low 32 bits of args[i] are at offset 16+8i.
	order  binary.AppendByteOrder
	sysnum numbers
	consts numbers
}

// numbers is a generated table of kernel numbers, sorted by name with no
// name twice (mksysnum refuses one). A sorted slice of constants is data
// the linker lays out; a map would be built by an initialiser at every
// start of every binary that links this package, the launcher's included.
type numbers []number

type number struct {
	name string
	v    uint32
}

// lookup returns the number named name, and whether t has it.
func (t numbers) lookup(name string) (uint32, bool) {
	i, ok := slices.BinarySearchFunc(t, name, func(n number, name string) int { return strings.Compare(n.name, name) })
	if !ok {
		return 0, false
	}
	return t[i].v, true
}

// archInfos is indexed by Arch (an array, not a map: no initialiser at
// start); infoOf is its checked read.
var archInfos = [...]archInfo{
	ArchX86_64: {
		name: "x86_64", auditArch: _AUDIT_ARCH_X86_64, killX32: true,
		order: binary.LittleEndian, sysnum: sysnumX86_64, consts: constX86_64,
	},
	ArchAArch64: {
		name: "aarch64", auditArch: _AUDIT_ARCH_AARCH64,
		order: binary.LittleEndian, sysnum: sysnumAArch64, consts: constAArch64,
	},
}

// infoOf returns the tables of a, and false for a value that is not an
// architecture.
func infoOf(a Arch) (archInfo, bool) {
	if a <= 0 || int(a) >= len(archInfos) {
		return archInfo{}, false
	}
	return archInfos[a], true
}

// seccomp_data layout (include/uapi/linux/seccomp.h): int nr; __u32 arch;
// __u64 instruction_pointer; __u64 args[6]. 64 bytes in all.
const (
	offNr           = 0
	offArch         = 4
	offArgs         = 16
	seccompDataSize = 64
)

// argLow returns the offset of the low 32 bits of args[i].
func (ai archInfo) argLow(i int) uint32 {
	if ai.order == binary.LittleEndian {
		return offArgs + 8*uint32(i)
	}
	return offArgs + 8*uint32(i) + 4
}
