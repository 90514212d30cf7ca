package cli

import (
	"os"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/initproc"
)

// TestMain serves the hidden modes sandbox-run re-executes itself in
// (the exec shim, the in-sandbox init): an in-process Run that starts one
// finds this test binary standing in for sandbox-run.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case initproc.Arg:
			os.Exit(initproc.Main(os.Args[2:]))
		case initproc.ExecArg:
			os.Exit(initproc.ExecMain(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}
