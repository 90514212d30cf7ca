//go:build linux || darwin

package matrix

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// bin is the sandbox-run binary built for this test run: the matrix runs
// through the binary, as on a node.
var bin string

func TestMain(m *testing.M) {
	dirsCleanup, err := sandboxtest.PrivateUserDirs("sbx-check-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrix: private cache and state directories:", err)
		os.Exit(1)
	}
	b, cleanup, err := sandboxtest.BuildSandboxRun("sbx-check-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrix: building sandbox-run:", err)
		dirsCleanup()
		os.Exit(1)
	}
	bin = b
	code := m.Run()
	cleanup()
	dirsCleanup()
	os.Exit(code)
}

// assertNothingLeft: the runner removed its tree and every survivor.
func assertNothingLeft(t *testing.T) {
	t.Helper()
	left, _ := filepath.Glob(fmt.Sprintf("/tmp/sbx-check-%d-*", os.Getpid()))
	for _, d := range left {
		if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) < 5*time.Minute && fi.Sys() != nil {
			t.Errorf("the runner left %s behind", d)
		}
	}
	// Survivors this process's runs tagged; none may be left. The listing
	// is the runner's own (sysctl on macOS, which has no /proc).
	procs, err := listProcesses()
	if err != nil {
		t.Errorf("survivors not checked: %v", err)
		return
	}
	prefix := fmt.Sprintf("survivor-%d-", os.Getpid())
	if pids := taggedIn(procs, os.Getpid(), func(a string) bool { return strings.HasPrefix(a, prefix) }); len(pids) > 0 {
		t.Errorf("survivors left: %v", pids)
	}
}
