//go:build !linux

package initproc

import "os"

// Main refuses: init runs only inside a Linux sandbox.
func Main(args []string) int {
	os.Stderr.WriteString("sandbox-run init: only inside a Linux sandbox\n")
	return 125
}

// ExecMain refuses: the shim runs only inside a Linux sandbox.
func ExecMain(args []string) int {
	os.Stderr.WriteString("sandbox-run exec: only inside a Linux sandbox\n")
	return 125
}
