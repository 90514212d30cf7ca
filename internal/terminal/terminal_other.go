//go:build !linux

package terminal

import (
	"io"
	"os"

	"github.com/sandbox-run/sandbox-run/internal/fault"
)

// Terminal is Linux's; elsewhere there is none.
type Terminal struct{}

// Open refuses: a terminal for the command is made only on Linux.
func Open(*os.File, io.Reader, io.Writer) (*Terminal, error) {
	return nil, fault.New("a terminal for the command", "only Linux gives one here", "run with --no-tty")
}

// Command is nil: there is no Terminal here.
func (*Terminal) Command() *os.File { return nil }

// Close does nothing: there is no Terminal here.
func (*Terminal) Close() {}
