//go:build linux || darwin

package probe

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// preadFD reads from fd only when it is a regular file, never blocking on
// a pipe or socket that happens to be open.
func preadFD(fd int, b []byte) (int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, fmt.Errorf("fd %d is not a regular file", fd)
	}
	return unix.Pread(fd, b, 0)
}

// startDetached starts path with args, stdio on /dev/null, in a new
// session when setsid is set, and does not wait for it. syscall.ForkExec
// rather than os/exec: it never asks for clone3, which the filter answers
// with ENOSYS.
func startDetached(path string, args []string, setsid bool) error {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	fd := null.Fd()
	_, err = syscall.ForkExec(path, append([]string{path}, args...), &syscall.ProcAttr{
		Env: []string{}, Files: []uintptr{fd, fd, fd}, Sys: &syscall.SysProcAttr{Setsid: setsid},
	})
	return err
}

// spawnSurvivor leaves a sleeper tagged with tag behind: in a session of
// its own (setsid), or reparented through a middle process that exits at
// once (double-fork).
func spawnSurvivor(mode, tag string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	switch mode {
	case "setsid":
		return startDetached(self, []string{Arg, "sleeper", tag}, true)
	case "double-fork":
		null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer null.Close()
		fd := null.Fd()
		pid, err := syscall.ForkExec(self, []string{self, Arg, "forker", tag}, &syscall.ProcAttr{
			Env: []string{}, Files: []uintptr{fd, fd, fd}})
		if err != nil {
			return err
		}
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				return err
			}
		}
	}
	return fmt.Errorf("unknown spawn mode %q", mode)
}
