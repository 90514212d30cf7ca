package sandboxtest

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Shells returns the POSIX shells installed here among /bin/sh, dash, bash
// and busybox (whose ulimit spell RLIMIT_NPROC differently), and fails t
// when there is none.
func Shells(t testing.TB) []string {
	t.Helper()
	var shells []string
	for _, sh := range []string{"/bin/sh", "/bin/dash", "/bin/bash", "/bin/busybox"} {
		if _, err := os.Stat(sh); err == nil {
			shells = append(shells, sh)
		}
	}
	if len(shells) == 0 {
		t.Fatal("sandboxtest: no POSIX shell installed")
	}
	return shells
}

// ShellCommand is sh run with args, busybox as its sh applet.
func ShellCommand(sh string, args ...string) *exec.Cmd {
	if sh == "/bin/busybox" {
		args = append([]string{"sh"}, args...)
	}
	return exec.Command(sh, args...)
}

// HardNProc returns this process's hard RLIMIT_NPROC, or skips t (fails
// under SANDBOX_REQUIRE=1) when it is unlimited or below min.
func HardNProc(t testing.TB, min uint64) uint64 {
	t.Helper()
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &rl); err != nil || rl.Max < min || rl.Max == unix.RLIM_INFINITY {
		Unavailable(t, fmt.Sprintf("a finite hard RLIMIT_NPROC of %d or more", min), fmt.Sprintf("it is %d here", rl.Max))
	}
	return rl.Max
}

// AsSandboxUser is the SysProcAttr of a child that runs as a sandbox
// would: as uid and gid 65534 under root (root could raise a hard limit
// the sandbox cannot), otherwise as the caller in a user namespace of its
// own (OwnUserNS).
func AsSandboxUser() *syscall.SysProcAttr {
	if os.Geteuid() == 0 {
		return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	}
	return OwnUserNS()
}
