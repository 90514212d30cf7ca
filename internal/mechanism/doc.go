// Package mechanism is the contract between package sandbox's run skeleton
// and the ways of running a command (bwrap, landlock, gvisor, seatbelt,
// tier 0): the Mechanism interface, the Result and the errors a mechanism
// returns, and the rules every mechanism applies the same way, so that a
// report means the same whatever ran: the limits a run has and how each is
// reported, how an exit status is read and classified, the process
// sampler of the mechanisms without a cgroup, process-group signalling,
// and the group guard that ends a helper's process group when
// sandbox-run dies (GroupGuard: bwrap, runsc).
//
// Each mechanism is a package below this one (bwrap, gvisor, landlock,
// off, seatbelt) that imports this one, the plan (internal/plan) and the
// network side (internal/hostnet); never package sandbox and never
// another mechanism (TestImportRules holds it). Config is what the
// skeleton hands every one of them.
package mechanism
