package bwrap

import "fmt"

// MaxArgs is bubblewrap's own cap on the arguments it parses in all: those
// on its command line, the command's own included, and those it reads
// through --args. Beyond it bwrap dies with "Exceeded maximum number of
// arguments" before the sandbox exists.
const MaxArgs = 9000

// CheckArgCount refuses a call that bwrap would refuse for its length:
// argv is bwrap's command line (program name, options, "--", the command
// and its arguments), stream the arguments sent through --args. It counts
// the program name too, so it may refuse one argument early, never late.
func CheckArgCount(argv, stream []string) error {
	if n := len(argv) + len(stream); n > MaxArgs {
		return fmt.Errorf("bwrap: %d arguments (%d on its command line, %d in its argument stream), more than bwrap's limit of %d", n, len(argv), len(stream), MaxArgs)
	}
	return nil
}
