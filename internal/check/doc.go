// Package check says which tier a machine really has: it probes what
// tier 1 needs (bwrap, user namespaces, seccomp, Yama, cgroups), sets up
// one real sandbox and reads it back, and runs the escape matrix.
//
// # The escape matrix
//
// egress-cases.json, at the top of the repository and embedded in every
// build, holds one row per attempt to get out: reading a flag file beside
// the workdir by every spelling, writing protected paths, reaching canaries
// on loopback, the host's address and Unix sockets, getting the egress
// proxy to connect to loopback or metadata, reaching a process of the same
// uid, outliving the run, pushing keystrokes, and every family of calls the
// seccomp filter denies. Each row names the probe that makes the attempt
// (sandbox-run __probe PROBE ARGS, internal/probe, so the matrix runs
// wherever sandbox-run does) and the outcome expected of every mechanism
// (bwrap, seatbelt, none) on every platform (linux, darwin, windows). A
// mechanism or platform without an expectation fails to load. The cases
// and their runner are internal/matrix; this package's surface is Check
// and its Report.
//
// # Guarantees
//
//   - Untested is not held. Every attempt runs unconfined first (the
//     positive control: same uid as the sandbox's command, same canary) and
//     must reach its target; an attempt whose control fails is untested on
//     this machine, with the control's answer as the reason. Attempts an
//     unprivileged user cannot make unconfined either (raw sockets) run
//     their control in a new user and network namespace, where they can.
//   - An attempt is judged by what reached the canary, not by what the
//     probe believed: writes are looked for on the host, survivors in the
//     host's process table, DNS exfiltration in the DNS canary's log, a
//     datagram to the proxy's port in a UDP canary the runner binds at the
//     address the command's proxy variable names (the probe names it
//     first and sends only once the canary is there).
//   - Anything that reached its canary confined is ESCAPED, whatever its
//     control did.
//   - The runner removes what it made (its tree under /tmp, the canaries,
//     the marker process, every tagged survivor) before Run returns.
//   - check reports tier 1 only when a real sandbox was set up and read back
//     (NoNewPrivs 1, Seccomp 2, no capabilities, namespaces of its own), no
//     check failed, and every group of the self-test held at least one
//     attempt. On macOS the sandbox is Seatbelt's: set up, and its report
//     checked (tier 1, mechanism seatbelt, never uid 0), since nothing can
//     be read back from inside there.
//   - An escape the matrix expects of the mechanism under test (Seatbelt
//     has no PID namespace: the lifecycle cases) is shown as a warning with
//     the matrix's reason, never as a hold, and does not count as testing
//     its group. Every other escape fails the tier.
//
// # Non-guarantees
//
//   - The matrix shows that these attempts fail, not that no attempt can
//     succeed: a kernel bug reachable through the allowed calls is outside
//     it.
//   - Attempts that need what this machine lacks (a cloud metadata service,
//     NAT64, a virtual console for TIOCLINUX, a kernel that answers a call
//     before checking privileges) stay untested here.
//   - The runner is one for Linux and macOS (internal/matrix's
//     runner_unix.go, with runner_linux.go and runner_darwin.go for what
//     differs). The macOS
//     side, its probes and check's macOS probes (env_darwin.go) compile
//     and vet for darwin but have not run on a Mac yet: the seatbelt
//     column is what the profile is designed to do (docs/seatbelt.md),
//     until scripts/test-macos.sh has run. Nothing exercises the windows
//     column.
//   - Running the matrix as root starts the controls as the sandbox's uid
//     (65534); the root-only attempts (a host sysctl) run their control as
//     root and write a sysctl's own value back.
package check
