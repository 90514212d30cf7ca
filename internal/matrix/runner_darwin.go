package matrix

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The macOS parts of the matrix's runner (runner_unix.go): the seatbelt
// column, controls without user namespaces, the process listing through
// sysctl, and ptys through /dev/ptmx. None of this has run on a Mac yet
// (docs/seatbelt.md); it compiles and vets for darwin.
const (
	nativeMechanism = "seatbelt"
	// No abstract Unix socket namespace on macOS: the abstract canary is
	// not set up, and its case is n/a here.
	hasAbstractSockets = false
)

// resolvedDir returns the fixture's directory as the sandbox sees it:
// /tmp is a link to /private/tmp, and Seatbelt matches resolved paths, so
// every path the runner hands out is the resolved one.
func resolvedDir(d string) string {
	if r, err := filepath.EvalSymlinks(d); err == nil {
		return r
	}
	return d
}

// sysProcAttr runs a control as the sandbox's uid ("") or the caller's
// ("caller"), in a session of its own. macOS has no user namespaces: a
// "userns" control (raw sockets, which an unprivileged user opens only
// where it holds capabilities) runs as the caller, so it reaches its
// canary when check runs as root and is untested otherwise.
func (fx *fixture) sysProcAttr(control string, tty *os.File) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true}
	if tty != nil {
		a.Setctty, a.Ctty = true, 0
	}
	if control == "" && fx.root {
		a.Credential = &syscall.Credential{Uid: uint32(fx.uid), Gid: uint32(fx.gid), Groups: []uint32{}}
	}
	return a
}

// listProcesses lists the host's processes through sysctl (kern.proc.all,
// then kern.procargs2 for each): there is no PID namespace on macOS, so a
// survivor is in the host's process table under the pid it had inside.
// Arguments are readable for the caller's own uid, or as root; a process
// whose arguments cannot be read is listed without them.
func listProcesses() ([]proc, error) {
	kp, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, fmt.Errorf("list processes: sysctl kern.proc.all: %w", err)
	}
	if len(kp) == 0 {
		return nil, fmt.Errorf("list processes: sysctl kern.proc.all listed nothing")
	}
	out := make([]proc, 0, len(kp))
	for _, k := range kp {
		pid := int(k.Proc.P_pid)
		p := proc{pid: pid}
		if b, err := unix.SysctlRaw("kern.procargs2", pid); err == nil {
			p.args, _ = parseProcArgs2(b)
		}
		out = append(out, p)
	}
	return out, nil
}

// openPty opens a new pseudo-terminal pair: posix_openpt, grantpt and
// unlockpt by hand. The slave's name is the one ptsname(3) gives,
// /dev/ttys and the master's minor number in three digits.
func openPty() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(m.Fd())
	for _, req := range []uint{unix.TIOCPTYGRANT, unix.TIOCPTYUNLK} {
		if err := unix.IoctlSetInt(fd, req, 0); err != nil {
			m.Close()
			return nil, nil, err
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		m.Close()
		return nil, nil, err
	}
	name := fmt.Sprintf("/dev/ttys%03d", unix.Minor(uint64(st.Rdev)))
	s, err := os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, s, nil
}

// pkgStateDirs are where a package manager keeps services' data, in the
// order tried: Homebrew on Apple silicon, then on Intel.
var pkgStateDirs = []string{"/opt/homebrew/var", "/usr/local/var"}

// osCanaries sets up the macOS-only canaries: ${pkg_flag}, a file holding
// the flag token in a package manager's var directory (on GitHub's runners
// Homebrew's prefix belongs to the runner user). Where no such directory
// is writable there is no ${pkg_flag}, and the cases that read it are
// untested. The returned func removes it.
func osCanaries(fx *fixture, v map[string]string) func() {
	for _, d := range pkgStateDirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue
		}
		f := filepath.Join(d, fmt.Sprintf("sbx-check-%d-pkgflag", os.Getpid()))
		if err := os.WriteFile(f, []byte(fx.token+"\n"), 0o644); err != nil {
			continue
		}
		v["pkg_flag"] = f
		return func() { os.Remove(f) }
	}
	return nil
}

// afterCase removes the launchd job a case may have submitted
// (${launchd_label}), confined or not, so that launchd does not restart
// it after the run. An error means there was no such job.
func afterCase(vars map[string]string) {
	if l := vars["launchd_label"]; l != "" {
		exec.Command("/bin/launchctl", "remove", l).Run()
	}
}

// pasteboardHas reports whether the host's general pasteboard holds s, as
// pbpaste prints it for the caller.
func pasteboardHas(s string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/usr/bin/pbpaste").Output()
	if err != nil {
		return false, fmt.Errorf("pbpaste: %w", err)
	}
	return strings.Contains(string(out), s), nil
}
