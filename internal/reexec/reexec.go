// Package reexec is the one table of sandbox-run's hidden modes: the names
// under which the binary re-executes itself, and the function each one
// runs. They are sandbox's (the init inside the sandbox, the exec shim of
// tier 0, the landlock shim: sandbox.HiddenModes) and the escape matrix's
// probe (internal/probe). cmd/sandbox-run consults Main first thing, before
// it parses a flag or touches a signal, so that a mode starts with the
// process's state as the runtime left it.
//
// A hidden mode is not a command for people: its arguments and output are
// a protocol between two copies of sandbox-run, which may change in any
// release.
package reexec

import (
	"github.com/sandbox-run/sandbox-run/internal/probe"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

// Main runs the hidden mode args[0] names with the arguments after it and
// returns its exit status; ok is false, and nothing ran, when args[0] names
// none (or args is empty).
func Main(args []string) (code int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	m, ok := modes()[args[0]]
	if !ok {
		return 0, false
	}
	return m(args[1:]), true
}

// modes is the table: sandbox's modes and the probe.
func modes() map[string]func([]string) int {
	m := sandbox.HiddenModes()
	m[probe.Arg] = probe.Main
	return m
}
