//go:build linux || darwin

package check

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// bin is the sandbox-run binary built for this test run: the matrix runs
// through the binary, as on a node.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("/tmp", "sbx-check-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755)
	bin = filepath.Join(dir, "sandbox-run")
	build := exec.Command("go", "build", "-o", bin, "../cmd/sandbox-run")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "check: building sandbox-run:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// assertNothingLeft: the runner removed its tree and every survivor.
func assertNothingLeft(t *testing.T) {
	t.Helper()
	left, _ := filepath.Glob("/tmp/sbx-check-[0-9]*")
	for _, d := range left {
		if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) < 5*time.Minute && fi.Sys() != nil {
			t.Errorf("the runner left %s behind", d)
		}
	}
	if pids := tagged("sleeper"); len(pids) > 0 {
		// sleeper is the probe's argument for a survivor; none may be left.
		t.Errorf("survivors left: %v", pids)
	}
}
