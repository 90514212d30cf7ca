//go:build !linux

package sandbox

import "os"

// guardArg is the group guard's hidden mode; the guard exists only on
// Linux.
const guardArg = "__sandbox-guard"

func guardMain() int {
	os.Stderr.WriteString("sandbox-run: group guard: exists only on Linux\n")
	return ExitSetup
}
