// Package e2e runs the sandbox-run binary as users and harnesses do, under
// the real bubblewrap and kernel. Every test that claims a protection runs
// the same attempt unconfined first (a positive control) where that is
// possible, so that a refusal proves the sandbox refused it.
package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// bin is the sandbox-run binary built for this test run.
var bin string

func TestMain(m *testing.M) {
	sandboxtest.ServeTestHost()
	dirsCleanup, err := sandboxtest.PrivateUserDirs("sbx-e2e-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: private cache and state directories:", err)
		os.Exit(1)
	}
	b, cleanup, err := sandboxtest.BuildSandboxRun("sbx-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building sandbox-run:", err)
		dirsCleanup()
		os.Exit(1)
	}
	bin = b
	code := m.Run()
	cleanup()
	dirsCleanup()
	os.Exit(code)
}
