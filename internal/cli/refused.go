package cli

import (
	"fmt"
	"io"

	"github.com/sandbox-run/sandbox-run/refusals"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

// newRefusals is the run's refusal collector: with --verbose it names
// each refusal on stderr as it happens, too.
func newRefusals(verbose bool, stderr io.Writer) *refusals.Collector {
	if verbose {
		return refusals.New(stderr)
	}
	return refusals.New(nil)
}

// printRefused names, once each, what the run refused the command, with
// the flag that would allow it: a tool that failed at the boundary said
// only "403" or "connection refused".
func printRefused(w io.Writer, rep sandbox.Report) {
	if len(rep.Refused) == 0 {
		return
	}
	fmt.Fprintf(w, "sandbox-run: the sandbox refused %d destination(s):\n", len(rep.Refused))
	refusals.Summary(w, rep.Refused)
}
