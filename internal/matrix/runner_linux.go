package matrix

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The Linux parts of the matrix's runner (runner_unix.go): bwrap's column,
// controls in a user namespace, the abstract socket canary, survivors
// found in /proc, and ptys through /dev/ptmx.
const (
	nativeMechanism    = "bwrap"
	hasAbstractSockets = true
)

// resolvedDir returns the fixture's directory as the sandbox sees it: on
// Linux, as it is.
func resolvedDir(d string) string { return d }

// sysProcAttr runs a control as the sandbox's uid ("") or the caller's
// ("caller"), in a session of its own; "userns" adds a new user and
// network namespace in which the caller's uid is 0.
func (fx *fixture) sysProcAttr(control string, tty *os.File) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true}
	if tty != nil {
		a.Setctty, a.Ctty = true, 0
	}
	switch control {
	case "":
		if fx.root {
			a.Credential = &syscall.Credential{Uid: uint32(fx.uid), Gid: uint32(fx.gid), Groups: []uint32{}}
		}
	case "userns":
		a.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
	}
	return a
}

// listProcesses lists the host's processes from /proc: each pid with its
// command line. A process that ends while it is read is left out; a /proc
// that cannot be listed is an error.
func listProcesses() ([]proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		out = append(out, proc{pid: pid, args: strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")})
	}
	return out, nil
}

// openPty opens a new pseudo-terminal pair.
func openPty() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, s, nil
}

// osCanaries sets up the canaries that exist only on macOS; none here.
func osCanaries(*fixture, map[string]string) func() { return nil }

// afterCase undoes what a macOS-only case left with a host service.
func afterCase(map[string]string) {}

// pasteboardHas: Linux has no system pasteboard the matrix judges.
func pasteboardHas(string) (bool, error) {
	return false, fmt.Errorf("no pasteboard on Linux")
}
