// Package protect protects the paths inside the writable directories
// that a host tool would read and act on (.bashrc, .npmrc, .mcp.json,
// .vscode/, the config and hooks of every git directory, the policy's
// --protect paths): how each is held (the layout: Acts, which package
// plan lays out for every mechanism), the run journal that records what
// could not be held (Start, Pending), the live guard that neutralises
// what the command makes there while the run lasts, the quarantine that
// neutralises it when the last run on the directory has ended, and the
// snapshots of a mechanism that cannot hold a path read-only (Snapshot).
// The layout is what every mechanism translates: bwrap binds it, Landlock
// keeps copies.
//
// Guarantees: nothing is created in the user's tree (no placeholder, no
// mount point); every action on the user's tree goes from the writable
// directory down by descriptors without following a link; a link where a
// protected path is refused at the start, and moved to the quarantine
// when the command made it; every walk is bounded, and a sweep past its
// bounds makes the run exit 125; what is neutralised is listed in the
// report and the audit.
//
// Non-guarantees: a missing protected path is writable while the run
// lasts (the live window, closed by the live guard only after each
// write); existing paths a mechanism cannot hold are writable until the
// settle puts their copies back; a git directory past the walk's bounds
// is not held. The package is Linux's: on other systems it has only
// Hooks.
//
// It imports the plan's shared packages (policy, pathguard, hostwalk,
// gitrepo, report, internal/mechanism for the run's Result) and never
// package sandbox or a mechanism.
package protect
