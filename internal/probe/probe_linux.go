package probe

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/filter"
)

// cmdlineHas reports whether /proc/PID/cmdline holds tag as one argument.
func cmdlineHas(pid, tag string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/cmdline")
	return err == nil && bytes.Contains(append([]byte{0}, b...), []byte("\x00"+tag+"\x00"))
}

// probeOS runs the probes that exist only on Linux.
func probeOS(o *probeOut, name string, a []string) int {
	need := func(n int) bool { return len(a) >= n }
	switch name {
	case "raw-socket":
		return probeRawSocket(o)
	case "proc-signal", "proc-environ", "ptrace": // PID TAG|SECRET
		if !need(2) {
			return 2
		}
		return processProbe(o, name, a[0], a[1])
	case "userns":
		return probeUserNS(o)
	case "foreign-abi":
		return probeForeignABI(o)
	case "abi-attempt": // KIND: make the call and exit 0 if it returns
		if !need(1) {
			return 2
		}
		return abiAttempt(a[0])
	case "seccomp": // FAMILY
		if !need(1) {
			return 2
		}
		return seccompProbe(o, a[0])
	case "tty-inject":
		return probeTTYInject(o)
	case "sysctl-write": // PATH
		if !need(1) {
			return 2
		}
		return probeSysctlWrite(o, a[0])
	case "proc-hidden": // PATH...
		return probeProcHidden(o, a)
	}
	fmt.Fprintf(os.Stderr, "__probe: unknown probe %q\n", name)
	return 2
}

func probeRawSocket(o *probeOut) int {
	for _, s := range []struct {
		name           string
		family, typ, p int
	}{
		{"inet-raw-icmp", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP},
		{"inet6-raw-icmpv6", unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6},
		{"packet-raw", unix.AF_PACKET, unix.SOCK_RAW, 0},
	} {
		fd, err := unix.Socket(s.family, s.typ|unix.SOCK_CLOEXEC, s.p)
		if err == nil {
			unix.Close(fd)
		}
		o.sub(s.name, err == nil, "socket: "+ErrText(err))
	}
	return o.verdict("no raw socket opened")
}

func probeUserNS(o *probeOut) int {
	self := "/bin/true"
	if _, err := os.Stat(self); err != nil {
		self, _ = os.Executable()
	}
	pid, err := syscall.ForkExec(self, []string{self}, &syscall.ProcAttr{
		Env: []string{}, Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}})
	if err == nil {
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
	}
	o.sub("clone-newuser", err == nil, "clone(CLONE_NEWUSER): "+ErrText(err))
	return o.verdict("no nested user namespace")
}

// probeForeignABI runs each attempt in a child: the filter's answer to a
// call from a foreign ABI is to kill the caller.
func probeForeignABI(o *probeOut) int {
	for _, kind := range abiAttempts() {
		self := "/proc/self/exe"
		pid, err := syscall.ForkExec(self, []string{self, Arg, "abi-attempt", kind}, &syscall.ProcAttr{Env: []string{}})
		if err != nil {
			o.sub(kind, false, "cannot start the attempt: "+ErrText(err))
			continue
		}
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
		switch {
		case ws.Signaled():
			o.sub(kind, false, "the caller was killed by "+ws.Signal().String())
		case ws.ExitStatus() == 0:
			o.sub(kind, true, "the call returned to the caller")
		case ws.ExitStatus() == abiFaulted:
			o.sub(kind, false, "the instruction faulted instead of entering the kernel: this kernel has no entry for the call, so none was made")
		default:
			o.sub(kind, false, fmt.Sprintf("the attempt failed before or after its call (exit %d)", ws.ExitStatus()))
		}
	}
	return o.verdict("every foreign-ABI call killed its caller")
}

func probeTTYInject(o *probeOut) int {
	c := byte('#')
	_, _, e := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
	o.sub("TIOCSTI", e == 0, "ioctl(0, TIOCSTI): "+errnoText(e))
	// TIOCLINUX subcode 6 reads the shift state: harmless, and
	// answered only on a virtual console.
	sub := byte(6)
	_, _, e = unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCLINUX, uintptr(unsafe.Pointer(&sub)))
	o.sub("TIOCLINUX", e == 0, "ioctl(0, TIOCLINUX): "+errnoText(e))
	return o.verdict("no keystroke pushed")
}

func probeSysctlWrite(o *probeOut, path string) int {
	cur, err := os.ReadFile(path)
	if err == nil {
		// The same value back: the write is the attempt, not a change.
		err = os.WriteFile(path, cur, 0)
	}
	o.sub(path, err == nil, "write the current value back: "+ErrText(err))
	return o.verdict("no host sysctl written")
}

func probeProcHidden(o *probeOut, paths []string) int {
	for _, p := range paths {
		b := make([]byte, 64)
		f, err := os.Open(p)
		n := 0
		if err == nil {
			n, err = f.Read(b)
			f.Close()
		}
		o.sub(p, n > 0, fmt.Sprintf("read %d bytes: %s", n, ErrText(err)))
	}
	return o.verdict("every host-wide /proc file is empty or unreadable")
}

func errnoText(e syscall.Errno) string {
	if e == 0 {
		return "ok"
	}
	return e.Error()
}

func processProbe(o *probeOut, name, pid, arg string) int {
	tag := arg
	if name == "proc-environ" {
		tag = "marker"
	}
	attempt := map[string]string{"proc-signal": "kill", "proc-environ": "environ", "ptrace": "seize"}[name]
	if !cmdlineHas(pid, tag) {
		o.sub(attempt, false, "pid "+pid+" is not the marker here (not visible, or another process)")
		return o.verdict("the marker is out of reach")
	}
	n, _ := strconv.Atoi(pid)
	switch name {
	case "proc-signal":
		err := unix.Kill(n, unix.SIGCONT) // harmless to the marker
		o.sub("kill", err == nil, "kill(SIGCONT): "+ErrText(err))
	case "proc-environ":
		b, err := os.ReadFile("/proc/" + pid + "/environ")
		o.sub("environ", err == nil && bytes.Contains(b, []byte(arg)), "read environ: "+readDetail(b, err, arg))
	case "ptrace":
		runtime.LockOSThread()
		// PTRACE_SEIZE stops nothing; the tracee is let go when this
		// process exits.
		_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(n), 0, 0, 0, 0)
		o.sub("seize", e == 0, "ptrace(PTRACE_SEIZE): "+errnoText(e))
	}
	return o.verdict("the marker is out of reach")
}

// sysCall is one call of a denied family, with arguments the kernel
// rejects cheaply (a bad flag, a NULL pointer, no such pid) or that change
// nothing, so that, unconfined, its answer differs from the filter's.
type sysCall struct {
	name string // the filter's name for the syscall
	nr   uintptr
	args [6]uintptr
	// label, when set, names the call in the output (same syscall twice).
	label string
}

const (
	bad32  = 0xffffffff
	noPID  = 0x7ffffff0
	badFD  = ^uintptr(0) // -1
	uffdUM = 1 | 0x40000000
)

func seccompFamilies() map[string][]sysCall {
	devnull := uintptr(0)
	if f, err := os.Open(os.DevNull); err == nil {
		devnull = f.Fd() // kept open for the probe's short life
	}
	fam := map[string][]sysCall{
		"memory": {
			{name: "ptrace", nr: unix.SYS_PTRACE, args: [6]uintptr{unix.PTRACE_PEEKDATA, noPID}},
			{name: "process_vm_readv", nr: unix.SYS_PROCESS_VM_READV, args: [6]uintptr{noPID, 0, 0, 0, 0, 1}},
			{name: "process_vm_writev", nr: unix.SYS_PROCESS_VM_WRITEV, args: [6]uintptr{noPID, 0, 0, 0, 0, 1}},
			{name: "kcmp", nr: unix.SYS_KCMP, args: [6]uintptr{noPID, noPID, 0}},
			{name: "pidfd_getfd", nr: unix.SYS_PIDFD_GETFD, args: [6]uintptr{badFD, 0, 0}},
		},
		"mount": {
			{name: "mount", nr: unix.SYS_MOUNT},
			{name: "umount2", nr: unix.SYS_UMOUNT2, args: [6]uintptr{0, 0xffff}},
			{name: "pivot_root", nr: unix.SYS_PIVOT_ROOT},
			{name: "chroot", nr: unix.SYS_CHROOT},
			{name: "open_tree", nr: unix.SYS_OPEN_TREE, args: [6]uintptr{badFD, 0, bad32}},
			{name: "move_mount", nr: unix.SYS_MOVE_MOUNT, args: [6]uintptr{badFD, 0, badFD, 0, bad32}},
			{name: "fsopen", nr: unix.SYS_FSOPEN, args: [6]uintptr{0, bad32}},
			{name: "fsconfig", nr: unix.SYS_FSCONFIG, args: [6]uintptr{badFD, 0xffff}},
			{name: "fsmount", nr: unix.SYS_FSMOUNT, args: [6]uintptr{badFD, bad32}},
			{name: "fspick", nr: unix.SYS_FSPICK, args: [6]uintptr{badFD, 0, bad32}},
			{name: "mount_setattr", nr: unix.SYS_MOUNT_SETATTR, args: [6]uintptr{badFD, 0, bad32}},
		},
		"namespaces": {
			{name: "unshare", nr: unix.SYS_UNSHARE, label: "unshare(0)"},
			{name: "setns", nr: unix.SYS_SETNS, args: [6]uintptr{badFD, 0}},
			{name: "clone3", nr: unix.SYS_CLONE3},
		},
		"machine": {
			{name: "settimeofday", nr: unix.SYS_SETTIMEOFDAY},
			{name: "clock_settime", nr: unix.SYS_CLOCK_SETTIME, args: [6]uintptr{9999}},
			{name: "clock_adjtime", nr: unix.SYS_CLOCK_ADJTIME, args: [6]uintptr{9999}},
			{name: "adjtimex", nr: unix.SYS_ADJTIMEX},
			{name: "reboot", nr: unix.SYS_REBOOT},
			{name: "sethostname", nr: unix.SYS_SETHOSTNAME, args: [6]uintptr{0, 9999}},
			{name: "kexec_load", nr: unix.SYS_KEXEC_LOAD, args: [6]uintptr{0, 0, 0, bad32}},
			{name: "init_module", nr: unix.SYS_INIT_MODULE},
			{name: "syslog", nr: unix.SYS_SYSLOG, args: [6]uintptr{10}},
		},
		"keyrings": {
			{name: "keyctl", nr: unix.SYS_KEYCTL, args: [6]uintptr{9999}},
			{name: "add_key", nr: unix.SYS_ADD_KEY},
			{name: "request_key", nr: unix.SYS_REQUEST_KEY},
		},
		"surface": {
			{name: "bpf", nr: unix.SYS_BPF, args: [6]uintptr{9999}},
			{name: "perf_event_open", nr: unix.SYS_PERF_EVENT_OPEN, args: [6]uintptr{0, 0, badFD, badFD}},
			{name: "userfaultfd", nr: unix.SYS_USERFAULTFD, args: [6]uintptr{uffdUM}},
			{name: "io_uring_setup", nr: unix.SYS_IO_URING_SETUP, args: [6]uintptr{1, 0}},
			{name: "io_uring_enter", nr: unix.SYS_IO_URING_ENTER, args: [6]uintptr{badFD}},
			{name: "io_uring_register", nr: unix.SYS_IO_URING_REGISTER, args: [6]uintptr{badFD}},
			{name: "name_to_handle_at", nr: unix.SYS_NAME_TO_HANDLE_AT, args: [6]uintptr{badFD, 0, 0, 0, bad32}},
			{name: "open_by_handle_at", nr: unix.SYS_OPEN_BY_HANDLE_AT, args: [6]uintptr{badFD, 0, 0}},
			{name: "fanotify_init", nr: unix.SYS_FANOTIFY_INIT, args: [6]uintptr{bad32}},
		},
		"arguments": {
			{name: "ioctl", nr: unix.SYS_IOCTL, args: [6]uintptr{devnull, unix.TIOCSTI, 0}, label: "ioctl(TIOCSTI) on a non-terminal"},
			{name: "socket", nr: unix.SYS_SOCKET, args: [6]uintptr{unix.AF_PACKET, unix.SOCK_RAW}, label: "socket(AF_PACKET)"},
			{name: "socket", nr: unix.SYS_SOCKET, args: [6]uintptr{unix.AF_ALG, unix.SOCK_SEQPACKET}, label: "socket(AF_ALG)"},
			{name: "socket", nr: unix.SYS_SOCKET, args: [6]uintptr{unix.AF_VSOCK, unix.SOCK_STREAM}, label: "socket(AF_VSOCK)"},
			{name: "personality", nr: unix.SYS_PERSONALITY, args: [6]uintptr{0x0400000}, label: "personality(READ_IMPLIES_EXEC)"},
		},
	}
	for k, v := range archFamilies() {
		fam[k] = v
	}
	return fam
}

// filterErrnos maps each syscall the filter denies to the errno it answers.
func filterErrnos() map[string]syscall.Errno {
	m := map[string]syscall.Errno{}
	for _, r := range filter.Rules() {
		m[r.Syscall] = errnoByName(r.Errno)
	}
	return m
}

// seccompProbe makes each call of family. A call reaches the kernel when
// its answer differs from the filter's errno; unconfined (the control),
// the kernel's own answer shows the call is reachable at all.
func seccompProbe(o *probeOut, family string) int {
	calls, ok := seccompFamilies()[family]
	if !ok {
		fmt.Fprintf(os.Stderr, "__probe seccomp: unknown family %q\n", family)
		return 2
	}
	errnos := filterErrnos()
	runtime.LockOSThread() // personality is per thread; restored below
	for _, c := range calls {
		want, denied := errnos[c.name]
		if !denied {
			fmt.Fprintf(os.Stderr, "__probe seccomp: %s is not in the filter's deny-list\n", c.name)
			return 2
		}
		r1, _, e := unix.Syscall6(c.nr, c.args[0], c.args[1], c.args[2], c.args[3], c.args[4], c.args[5])
		if e == 0 {
			switch c.name {
			case "socket", "userfaultfd", "fanotify_init":
				unix.Close(int(r1))
			case "personality":
				unix.Syscall(unix.SYS_PERSONALITY, r1, 0, 0)
			}
		}
		label := c.label
		if label == "" {
			label = c.name
		}
		o.sub(strings.ReplaceAll(label, " ", "_"), e != want, fmt.Sprintf("%s answered %s (the filter answers %s)", label, errnoText(e), want.Error()))
	}
	return o.verdict("every call got the filter's answer")
}

// errnoByName turns the filter's x/sys errno names into values; the filter
// uses only these three.
func errnoByName(name string) syscall.Errno {
	switch name {
	case "ENOSYS":
		return unix.ENOSYS
	case "EAFNOSUPPORT":
		return unix.EAFNOSUPPORT
	}
	return unix.EPERM
}

// markerKey joins a new anonymous session keyring on this thread and adds
// a user key described desc to it. The keyring and the key go when the
// process exits.
func markerKey(desc string) error {
	runtime.LockOSThread() // session keyrings belong to a thread's credentials
	// A NULL name makes a new anonymous keyring.
	if _, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); e != 0 {
		return e
	}
	_, err := unix.AddKey("user", desc, []byte("marker"), unix.KEY_SPEC_SESSION_KEYRING)
	return err
}

// abiFaulted is the exit status of an abi-attempt whose instruction
// faulted instead of entering the kernel. A kernel without the i386 gate
// (IA32 emulation off, or a hypervisor that does not deliver int $0x80 as
// a system call) answers int $0x80 with SIGSEGV: no call was made, in the
// control or confined, so the attempt did not reach the kernel. Without
// this, Go's own exit status after an unrecovered fault (2) would read as
// a call that returned.
const abiFaulted = 3

// abiAttempt makes the foreign-ABI call kind in this process and returns
// 0 if the kernel answered, abiFaulted if the instruction faulted. A
// filter that kills the caller ends the process before either.
func abiAttempt(kind string) (code int) {
	// The fault of int $0x80 without a gate is SIGSEGV with si_code
	// SI_KERNEL, which Go turns into a panic only when asked.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			code = abiFaulted
		}
	}()
	abiCall(kind)
	return 0
}
