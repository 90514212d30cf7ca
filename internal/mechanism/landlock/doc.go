// Package landlock is the Landlock mechanism: where bwrap cannot run, the
// command runs as a plain child of sandbox-run under a Landlock ruleset
// (package landlock at the module's top, imported here as llrules) and
// the seccomp deny-list, applied by a shim of this binary (Arg, Main)
// between fork and exec. It keeps what Landlock can hold (file system
// access, and TCP connect to the proxy's port from ABI 4) and names in
// the report what it loses: there is no namespace of its own, so no
// private /tmp, no PID or network isolation beyond the ruleset.
//
// What the command may reach comes from the run's plan (package plan, by
// path), the one bwrap binds and gVisor translates: translate turns its
// steps into the ruleset's input and names each step Landlock cannot hold
// (Unheld; in the report's losses), and TestTranslateGolden checks it
// from the same plan fixtures as bwrap's and gVisor's translations. So
// the plan's refusals (a --read that would cover the sandbox's own /proc,
// /dev or /tmp, one inside a writable dir, a search over its bound) are
// Landlock's too. Protected paths the plan holds read-only are kept as
// copies instead (landlock_protect_linux.go).
//
// It imports the contract (internal/mechanism), the plan and the network
// side; never package sandbox and never another mechanism.
package landlock
