// Package plan gathers, once per run, the host facts a Linux mechanism
// needs and lays them out as the plan every Linux mechanism translates
// (Plan, New, NewLending, Start). The plan owns the mount
// layout: the system paths, the sandbox's own /proc, /dev and /tmp, the
// --read paths with their sockets and FIFOs covered, the writable dirs
// and the protected paths held onto themselves, in bwrap's order; bwrap
// binds it as it is, gVisor, an image's root and Landlock (its by-path
// form, into grants and the steps it cannot hold) translate it. The
// skeleton (package sandbox) builds it once per run, as the mechanism's
// Layout asks (Start: by descriptor or path, the lent owner, copies of
// what cannot be held), and hands it to the mechanism. It also
// holds the checks the mechanisms share on the host: which host paths
// are shown inside (ShownInside), who may reach a path (AccessibleAs,
// AccessibleVia), which directories are the caller's own (HostOwn), and
// how a pathguard refusal is worded (GuardErr).
//
// Guarantees: the facts are gathered in one step (gatherFacts) that
// vets every source with pathguard and refuses what cannot be laid out
// safely; the layout is computed from the facts alone, with no system
// call, so the same facts give the same mounts (the goldens in
// testdata/layout hold it for each bwrap feature set); every bind by
// descriptor is of the very inode that was vetted; nothing is created in
// the user's tree; every search and walk is bounded, and a run over a
// bound is refused.
//
// Non-guarantees: a socket or FIFO made after the search, and a path
// swapped after it was vetted but bound by path (a bwrap without
// --bind-fd, noted in the report), are not covered. The layout is
// written in package mount's steps, a vocabulary of no mechanism: bwrap
// and gVisor each translate it. The package is Linux's: on other systems
// it has only HostOwn and the path resolution helpers.
//
// It imports the shared packages (policy, pathguard, mount,
// internal/hostwalk, internal/protect, internal/fault, report) and never
// package sandbox or a mechanism.
package plan
