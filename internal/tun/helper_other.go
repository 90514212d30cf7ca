//go:build !linux

package tun

import (
	"fmt"
	"os"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
)

// HelperMain exists on Linux only.
func HelperMain([]string) int {
	fmt.Fprintln(os.Stderr, "sandbox-run: the network namespace helper runs on Linux only")
	return exitcode.Setup
}
