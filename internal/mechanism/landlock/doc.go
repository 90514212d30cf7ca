// Package landlock is the Landlock mechanism: where bwrap cannot run, the
// command runs as a plain child of sandbox-run under a Landlock ruleset
// (package landlock at the module's top, imported here as llrules) and
// the seccomp deny-list, applied by a shim of this binary (Arg, Main)
// between fork and exec. It keeps what Landlock can hold (file system
// access, and TCP connect to the proxy's port from ABI 4) and names in
// the report what it loses: there is no namespace of its own, so no
// private /tmp, no PID or network isolation beyond the ruleset.
//
// It imports the contract (internal/mechanism), the plan and the network
// side; never package sandbox and never another mechanism.
package landlock
