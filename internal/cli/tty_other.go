//go:build !linux

package cli

import "os"

// isTerminal is false: a terminal for the command is made only on Linux,
// so --tty is never chosen automatically elsewhere.
func isTerminal(*os.File) bool { return false }
