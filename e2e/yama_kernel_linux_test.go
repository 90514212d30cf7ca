package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// ptraceScope reads kernel.yama.ptrace_scope, or marks the test
// unavailable (a failure under SANDBOX_REQUIRE_YAMA=1) without Yama.
func ptraceScope(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if errors.Is(err, fs.ErrNotExist) {
		sandboxtest.KernelUnavailable(t, sandboxtest.RequireYamaEnv, "the Yama LSM", "this kernel has no kernel.yama.ptrace_scope")
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("kernel.yama.ptrace_scope: %q, %v", b, err)
	}
	return n
}

// The debugger's attempts (strace writes to stderr, here joined to
// stdout: /dev/stdout, a pipe of the test's user, cannot be reopened
// inside). strace -q prints "+++ exited with 0 +++" when it
// traced its target to the end, and "Operation not permitted" when the
// kernel refused the attach.
const (
	// A debugger inside traces its own child.
	traceOwnChild = `strace -q -f true 2>&1; echo "strace=$?"`
	// It attaches to a sibling: a child of the same shell, not a
	// descendant of strace.
	traceSibling = `sleep 3 & pid=$!; strace -q -p $pid 2>&1; echo "strace=$?"`
)

// TestPtraceUnderYama: with kernel.yama.ptrace_scope=1, --ptrace runs, and
// strace inside traces its own child but cannot attach to a process that
// is not its descendant. With 0, --ptrace is refused with the fix. make
// test-vm runs it at both values on Debian's kernel.
func TestPtraceUnderYama(t *testing.T) {
	needBwrap(t)
	scope := ptraceScope(t)
	if _, err := exec.LookPath("strace"); err != nil {
		sandboxtest.Unavailable(t, "strace", "apt-get install -y strace")
		return
	}
	w := sandboxtest.WorkDir(t)
	if scope == 0 {
		r := sandboxed(t, w, traceOwnChild, "--ptrace")
		oneLine(t, r, "--ptrace refused", "kernel.yama.ptrace_scope is 0", "fix:", "sysctl -w kernel.yama.ptrace_scope=1")
		return
	}
	if scope != 1 {
		sandboxtest.KernelUnavailable(t, sandboxtest.RequireYamaEnv, "kernel.yama.ptrace_scope 0 or 1",
			fmt.Sprintf("it is %d; this test covers 0 and 1", scope))
	}

	// Own child: traced with --ptrace; without it the seccomp filter
	// refuses ptrace, so --ptrace is what allowed it.
	if r := sandboxed(t, w, traceOwnChild); strings.Contains(r.stdout, "+++ exited with 0 +++") {
		t.Fatalf("strace traced without --ptrace: %q", r.stdout)
	}
	r := sandboxed(t, w, traceOwnChild, "--ptrace")
	if r.code != 0 || !strings.Contains(r.stdout, "+++ exited with 0 +++") || !strings.Contains(r.stdout, "strace=0") {
		t.Fatalf("--ptrace: strace of its own child: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}

	// Sibling: the positive control runs the same script as the test's
	// own user with CAP_SYS_PTRACE (root), where the attach works.
	if os.Geteuid() != 0 {
		sandboxtest.Unavailable(t, "the sibling attach's control", "it needs root (CAP_SYS_PTRACE) to show the attach can work")
		return
	}
	ctl, err := exec.Command("sh", "-c", traceSibling).CombinedOutput()
	if err != nil || !strings.Contains(string(ctl), "+++ exited with 0 +++") {
		t.Fatalf("control: strace -p of a sibling as root: %v, %q", err, ctl)
	}
	r = sandboxed(t, w, traceSibling, "--ptrace")
	if !strings.Contains(r.stdout, "Operation not permitted") || strings.Contains(r.stdout, "+++ exited") {
		t.Fatalf("--ptrace: strace attached to a process that is not its descendant: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}
