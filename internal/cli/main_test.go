package cli

import (
	"fmt"
	"os"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

// TestMain serves the hidden modes sandbox-run re-executes itself in
// (the exec shim, the in-sandbox init): an in-process Run that starts one
// finds this test binary standing in for sandbox-run.
func TestMain(m *testing.M) {
	if code, ok := sandbox.Reexec(os.Args[1:]); ok {
		os.Exit(code)
	}
	cleanup, err := sandboxtest.PrivateUserDirs("sbx-cli-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cli: private cache and state directories:", err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}
