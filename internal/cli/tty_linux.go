package cli

import (
	"os"

	"golang.org/x/sys/unix"
)

// ttySupported: sandbox.Options.Terminal is honoured here.
const ttySupported = true

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
