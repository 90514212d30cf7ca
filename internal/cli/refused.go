package cli

import (
	"fmt"
	"io"

	"github.com/sandbox-run/sandbox-run/internal/refusals"
	"github.com/sandbox-run/sandbox-run/report"
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
func printRefused(w io.Writer, rep report.Report) {
	printHandIn(w, rep.HandIn)
	if len(rep.Refused) == 0 {
		return
	}
	fmt.Fprintf(w, "sandbox-run: the sandbox refused %d destination(s):\n", len(rep.Refused))
	refusals.Summary(w, rep.Refused)
}

// printHandIn names what the run handed in from the host, an unsafe
// socket as such.
func printHandIn(w io.Writer, h *report.HandInReport) {
	if h == nil {
		return
	}
	if h.SSHAgent != "" {
		fmt.Fprintf(w, "sandbox-run: handed in: ssh-agent %s (filtered: list and sign only) at %s\n", h.SSHAgent, h.SSHAgentInside)
	}
	for _, s := range h.Sockets {
		if s.Unsafe {
			fmt.Fprintf(w, "sandbox-run: handed in: UNSAFE socket %s: it %s, so the command had host root\n", s.Path, s.Why)
		} else {
			fmt.Fprintf(w, "sandbox-run: handed in: socket %s\n", s.Path)
		}
	}
	for _, p := range h.HostPorts {
		fmt.Fprintf(w, "sandbox-run: handed in: host port %s\n", p)
	}
	for _, p := range h.Published {
		fmt.Fprintf(w, "sandbox-run: published: port %d inside at %s on the host\n", p.Inside, p.Host)
	}
}
