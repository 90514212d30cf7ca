package probe

import "golang.org/x/sys/unix"

// archFamilies are the x86-only rules of the filter.
func archFamilies() map[string][]sysCall {
	return map[string][]sysCall{"x86": {
		{name: "iopl", nr: unix.SYS_IOPL, args: [6]uintptr{99}},
		{name: "ioperm", nr: unix.SYS_IOPERM, args: [6]uintptr{0, 0, 0}},
		{name: "modify_ldt", nr: unix.SYS_MODIFY_LDT, args: [6]uintptr{99}},
		{name: "uselib", nr: unix.SYS_USELIB},
		{name: "_sysctl", nr: unix.SYS__SYSCTL},
		{name: "sysfs", nr: unix.SYS_SYSFS, args: [6]uintptr{99}},
		{name: "nfsservctl", nr: unix.SYS_NFSSERVCTL},
	}}
}

// abiAttempts are the foreign-ABI calls an x86_64 process can make: an x32
// call (the number with bit 0x40000000) and an i386 call through int $0x80.
func abiAttempts() []string { return []string{"x32", "int80"} }

// abiCall makes the attempt; it returns only if the kernel answered.
func abiCall(kind string) {
	switch kind {
	case "x32":
		unix.RawSyscall(unix.SYS_GETPID|0x40000000, 0, 0, 0)
	case "int80":
		int80Getpid()
	}
}

// int80Getpid makes getpid through the i386 entry point (int $0x80,
// eax = 20): probe_linux_amd64.s.
func int80Getpid() uintptr
