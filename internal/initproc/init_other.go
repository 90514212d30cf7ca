//go:build !linux

package initproc

import (
	"os"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
)

// Main refuses: init runs only inside a Linux sandbox.
func Main(args []string) int {
	os.Stderr.WriteString("sandbox-run init: only inside a Linux sandbox\n")
	return exitcode.Setup
}

// ExecMain refuses: the shim runs only inside a Linux sandbox.
func ExecMain(args []string) int {
	os.Stderr.WriteString("sandbox-run exec: only inside a Linux sandbox\n")
	return exitcode.Setup
}
