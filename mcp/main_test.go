package mcp

import (
	"os"
	"testing"

	"github.com/sandbox-run/sandbox-run/sandbox"
)

// TestMain serves the hidden modes sandbox-run re-executes itself in (the
// exec shim of tier 0): an in-process Serve that starts one finds this
// test binary standing in for sandbox-run.
func TestMain(m *testing.M) {
	if code, ok := sandbox.Reexec(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
