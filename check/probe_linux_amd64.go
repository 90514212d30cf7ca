package check

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
