// Command sandbox-run-init is sandbox-run's init inside the sandbox, and
// the exec shim init starts, as a binary of its own. It links only
// internal/initproc, so it starts about 1 ms sooner than sandbox-run
// re-executed, on every run that needs an init (forwarding, a terminal, an
// rlimit the sandbox's /bin/sh cannot set).
//
// make build puts it next to sandbox-run and stamps its Go build ID into
// sandbox-run, which uses it only when the file beside it carries that ID
// (see sandbox.InitBinary); otherwise sandbox-run is its own init, as a
// plain go build or go install of cmd/sandbox-run leaves it. It is not a
// command for people.
package main

import (
	"fmt"
	"os"

	"github.com/sandbox-run/sandbox-run/internal/initproc"
)

func main() {
	if len(os.Args) > 1 {
		if m, ok := initproc.Modes()[os.Args[1]]; ok {
			os.Exit(m(os.Args[2:]))
		}
	}
	fmt.Fprintln(os.Stderr, "sandbox-run-init: not a command: sandbox-run starts it inside its sandboxes")
	os.Exit(2)
}
