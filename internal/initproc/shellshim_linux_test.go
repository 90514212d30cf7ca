package initproc

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestShellExec runs init's shell shim (shellExecArgs) under each shell
// there is here (dash takes ulimit -p, bash -u): the command must start
// with RLIMIT_NPROC at the ceiling, soft and hard, and its arguments
// intact; asked for more than the hard limit, the shell must write one
// error line and exit 125 without starting the command. Control: the same
// command started directly reads the hard limit inherited, not the
// ceiling.
func TestShellExec(t *testing.T) {
	sandboxtest.ProcessCount(t)
	var hard unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &hard); err != nil || hard.Max < 200 || hard.Max == unix.RLIM_INFINITY {
		sandboxtest.Unavailable(t, "a finite hard RLIMIT_NPROC of 200 or more", fmt.Sprintf("it is %d here", hard.Max))
	}
	// Root could raise the hard limit; the sandbox never runs as root.
	attr := sandboxtest.OwnUserNS()
	if os.Geteuid() == 0 {
		attr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	}
	probe := []string{"probe", "-c", `grep 'Max processes' /proc/self/limits; printf '[%s]' "$@"`, "zero", "a b", ""}
	run := func(sh string, args []string) (out, errOut string, code int) {
		if sh == "/bin/busybox" {
			args = append([]string{"sh"}, args...)
		}
		c := exec.Command(sh, args...)
		var o, e strings.Builder
		c.Stdout, c.Stderr, c.SysProcAttr, c.Dir = &o, &e, attr, "/"
		c.Run()
		return o.String(), e.String(), c.ProcessState.ExitCode()
	}
	direct, _, _ := run("/bin/sh", probe[1:])
	if strings.Contains(direct, " 150 ") || !strings.Contains(direct, fmt.Sprint(hard.Max)) {
		t.Fatalf("untested: started directly the probe reads %q, not the inherited hard limit %d", direct, hard.Max)
	}
	shells := 0
	for _, sh := range []string{"/bin/sh", "/bin/dash", "/bin/bash", "/bin/busybox"} {
		if _, err := os.Stat(sh); err != nil {
			continue
		}
		shells++
		t.Run(sh, func(t *testing.T) {
			out, errOut, code := run(sh, shellExecArgs(150, "/bin/sh", probe)[1:])
			if code != 0 || !strings.Contains(out, "150                  150") || !strings.HasSuffix(out, "[a b][]") || errOut != "" {
				t.Fatalf("nproc 150: exit %d out %q stderr %q, want the ceiling soft and hard, then [a b][]", code, out, errOut)
			}
			out, errOut, code = run(sh, shellExecArgs(hard.Max+1, "/bin/sh", probe)[1:])
			if code != 125 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "error: ") {
				t.Fatalf("nproc above hard: exit %d out %q stderr %q, want 125, one error line and nothing run", code, out, errOut)
			}
		})
	}
	if shells == 0 {
		t.Fatal("no shell to run the shim")
	}
}
