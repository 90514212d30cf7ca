// Package seatbelt is sandbox-run's macOS tier 1: it turns a policy.Policy
// into a Seatbelt profile (SBPL) for /usr/bin/sandbox-exec, and reads the
// profile's denials back from the unified log.
//
// Render is a pure function: the same policy and Options give the same
// profile, byte for byte, on any operating system, which is how the profile
// is tested on machines without a Mac (golden files, a fuzzed escaping
// oracle). ParseLine and ReadDenials read the output of
// `log stream --style ndjson` and are likewise portable. Running
// sandbox-exec is the job of package sandbox (sandbox_darwin.go).
//
// # Guarantees
//
// These hold for the profile text; whether macOS enforces the text as
// documented here has not been verified on a Mac by this project yet (see
// docs/seatbelt.md).
//
//   - Default deny: the profile starts with (deny default) and every
//     permission is an explicit allow. Every deny carries the run's tag.
//   - Files: the system directories are readable, except the var and etc
//     directories of /usr/local, /opt/homebrew and /opt/local (only what
//     TLS, git and fonts need is read there); the workdir, the --write
//     directories and the private TMPDIR are readable and writable; the
//     --read paths are readable; nothing else of the file system is, not
//     even listable. The protected paths inside writable directories are
//     never writable, in any letter case, whether they exist or not, and
//     the directories that lead to them cannot be renamed, removed or
//     replaced by a symbolic link. Git's metadata (a .git file or
//     directory, and its config, hooks, commondir, info, modules and
//     worktrees) is never writable at any depth below a writable
//     directory; TMPDIR is exempt.
//   - Network: TCP connect(2) only, to localhost on the egress proxy's and
//     the LLM channel's ports. No UDP, no other address, no DNS (neither a
//     socket nor mDNSResponder's Mach service), no bind or listen, and no
//     Unix socket by path (socketpair(2) is allowed). With a proxy, the
//     trust daemons Security.framework verifies certificates through.
//   - Processes: the command may signal and inspect only processes of its
//     own sandbox; sysctls that list other processes or read their
//     arguments are not readable.
//   - No string from the policy can change the profile's structure: every
//     path is written as an SBPL string literal with '\' and '"' escaped,
//     and a path with a control character, invalid UTF-8 or more than
//     MaxStringLen bytes is refused (ErrUnsafeString). FuzzRenderPaths
//     checks this against a reader with TinyScheme's string rules.
//
// # Non-guarantees
//
//   - Seatbelt is a kernel policy over the calling uid; it is no
//     namespace. The command shares the host's PID space, loopback and
//     file system view; anything the profile allows it reaches as the
//     caller's user.
//   - sandbox-exec and SBPL are deprecated, undocumented Apple interfaces.
//     Operation names and filters follow what Chromium, Codex and other
//     public profiles use; a macOS release can change them.
//   - localhost on the proxy port includes ::1: the runner holds the port
//     on both 127.0.0.1 and ::1 so that no other process can serve there.
//   - trustd, reachable when there is a proxy, fetches OCSP responses and
//     CRLs from its own process, outside the proxy.
//   - Regex filters match paths; a bare repository (x.git/config) and the
//     target of a gitfile made before the run that points outside every
//     .git are not held.
//   - Only paths are matched. A hard link made to a protected file before
//     the run from elsewhere in a writable directory is another path.
//   - The unified log is lossy under load and delivers late; a denial
//     missing from the audit log does not mean nothing was denied.
//
// # Platform differences from Linux (bwrap)
//
//   - No private /tmp: /tmp is not writable; TMPDIR points at a private
//     directory instead, and its size is not capped.
//   - No PID namespace: a process that leaves the command's process group
//     (setsid, double fork) is not ended with the run.
//   - No seccomp filter: the system-call surface is limited only by what
//     Seatbelt checks.
package seatbelt
