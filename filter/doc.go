// Package filter builds the seccomp deny-list that every tier-1 sandbox runs
// under, as classic BPF for bwrap --seccomp FD, for x86_64 and aarch64 from
// one binary. It is pure Go (golang.org/x/net/bpf for the encoding): no cgo,
// no libseccomp, no system state read while assembling.
//
// The rules live in one table (Rules); Assemble compiles it, docs/seccomp.md
// is generated from it, and the tests run it on x/net/bpf's VM for both
// architectures and on the real kernel under bwrap.
//
// # Guarantees
//
// For a Program from Assemble(arch, opts), installed on a kernel of arch:
//
//   - A syscall made through any other ABI (seccomp_data.arch is not arch's
//     AUDIT_ARCH, such as i386 int $0x80 on x86_64) kills the whole process
//     (SECCOMP_RET_KILL_PROCESS). So does, on x86_64, an x32 call (number
//     with bit 0x40000000).
//   - Each call in Rules fails with its errno and never reaches the kernel.
//     ptrace is allowed only with Options.AllowPtrace; nothing else is ever
//     widened.
//   - Argument rules compare the low 32 bits of the argument, as the
//     kernel reads it: setting bit 32 of ioctl's request does not get
//     TIOCSTI past the filter.
//   - clone3 fails with ENOSYS (its flags live in memory the filter cannot
//     read), so libc falls back to clone, whose flags the filter checks.
//   - The program is validated: at most BPF_MAXINSNS instructions, forward
//     in-range jumps (a conditional jump over 255 is refused with
//     ErrJumpTooFar, never truncated), aligned 4-byte loads inside the
//     64-byte seccomp_data, a final return.
//
// # Non-guarantees
//
//   - It is a deny-list: every syscall not listed is allowed, including ones
//     added to future kernels. It shrinks the kernel surface and blocks the
//     first step of known escapes; the namespaces, mounts and capability
//     drop that bwrap sets up are the boundary.
//   - io_uring is blocked outright, because its operations run without
//     passing through seccomp; nothing here filters what an io_uring could
//     do.
//   - Pointer arguments (paths, clone3's struct, sockaddrs) cannot be read
//     by seccomp; rules see numbers only. Network reach is bwrap's
//     --unshare-net and the egress proxy, not this filter.
//   - Denied calls return an errno rather than killing, so a program that
//     probes for a feature degrades instead of crashing. An attacker learns
//     that a call is denied; that is not a secret.
//   - The filter says nothing about the kernel it is loaded on: whether
//     Yama exists is CheckPtrace's question, and loading is bwrap's job.
//
// # Platform differences
//
//   - Tables for both architectures are generated from golang.org/x/sys
//     (go generate; see internal/mksysnum), and a test compares every entry
//     for the native architecture with x/sys's unix.SYS_* numbers.
//   - x86_64 only: the x32 kill, and the legacy calls iopl, ioperm,
//     modify_ldt, uselib, _sysctl and sysfs, which aarch64 does not have.
//     nfsservctl is denied on both (on aarch64 its number is reserved).
//   - Both architectures are little-endian, so Bytes is little-endian and
//     the low word of args[i] is at offset 16+8i.
//   - On any other architecture, or off Linux, NativeArch returns an error
//     wrapping ErrUnsupportedArch and the launcher must refuse tier 1.
package filter
