package initproc

import (
	"fmt"
	"strings"
	"testing"

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
	hard := sandboxtest.HardNProc(t, 200)
	probe := []string{"probe", "-c", `grep 'Max processes' /proc/self/limits; printf '[%s]' "$@"`, "zero", "a b", ""}
	run := func(sh string, args []string) (out, errOut string, code int) {
		c := sandboxtest.ShellCommand(sh, args...)
		var o, e strings.Builder
		c.Stdout, c.Stderr, c.SysProcAttr, c.Dir = &o, &e, sandboxtest.AsSandboxUser(), "/"
		c.Run()
		return o.String(), e.String(), c.ProcessState.ExitCode()
	}
	direct, _, _ := run("/bin/sh", probe[1:])
	if strings.Contains(direct, " 150 ") || !strings.Contains(direct, fmt.Sprint(hard)) {
		t.Fatalf("untested: started directly the probe reads %q, not the inherited hard limit %d", direct, hard)
	}
	for _, sh := range sandboxtest.Shells(t) {
		t.Run(sh, func(t *testing.T) {
			out, errOut, code := run(sh, shellExecArgs(150, "/bin/sh", probe)[1:])
			if code != 0 || !strings.Contains(out, "150                  150") || !strings.HasSuffix(out, "[a b][]") || errOut != "" {
				t.Fatalf("nproc 150: exit %d out %q stderr %q, want the ceiling soft and hard, then [a b][]", code, out, errOut)
			}
			out, errOut, code = run(sh, shellExecArgs(hard+1, "/bin/sh", probe)[1:])
			if code != 125 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "error: ") {
				t.Fatalf("nproc above hard: exit %d out %q stderr %q, want 125, one error line and nothing run", code, out, errOut)
			}
		})
	}
}
