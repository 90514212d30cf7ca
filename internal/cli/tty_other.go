//go:build !linux

package cli

import "os"

// ttySupported: no mechanism here makes a terminal for the command.
const ttySupported = false

// isTerminal is false: a terminal for the command is made only on Linux,
// so --tty is never chosen automatically elsewhere.
func isTerminal(*os.File) bool { return false }
