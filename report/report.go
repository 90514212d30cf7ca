// Package report is the contract between sandbox-run and whoever reads
// what a run had in force: the Report type, version ReportSchema, that
// `sandbox-run run --report` writes and package sandbox returns. Every
// field is documented where it is declared; docs/report.schema.json is
// generated from these types (sandbox's TestReportSchema fails when they
// and the schema disagree) and docs/report.md shows one per mechanism.
//
// Fields are added within a version; a field removed, renamed or changed
// in meaning is a new version. The package holds only the types and the
// rules that read them: it runs nothing and touches no host state.
package report

import (
	"fmt"

	"github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/refusals"
)

// DeveloperReport says what of the caller's own setup the command got
// (sandbox-run run --dev-env, package devenv). The git settings are named,
// never their values: a report is shared in CI logs and bug reports, and
// the caller's name and address are theirs, while whether the command had
// an identity is what explains a failing git commit.
type DeveloperReport struct {
	// GitIdentity lists the git settings carried in through
	// GIT_CONFIG_KEY_n (user.name, user.email, init.defaultBranch);
	// empty when none was.
	GitIdentity []string `json:"git_identity,omitempty"`
	// Toolchains are the directories put on PATH ahead of the system
	// ones, in order.
	Toolchains []string `json:"toolchains,omitempty"`
}

// Transparent is what the report says of transparent egress: whether
// any TCP connection of the command (no proxy variables needed) goes out
// through the host side's netstack, judged like the HTTP proxy's, and
// if not, why (the mechanism cannot have it, or the run cannot).
type Transparent struct {
	// Enabled is set when any TCP connection inside goes out through
	// sandbox-run's TUN device and resolver, judged like the proxy's.
	Enabled bool `json:"transparent"`
	// Reason says why it is not, when it is not.
	Reason string `json:"reason,omitempty"`
	// Brokered is set when, besides, the command's TCP connections to
	// allowed addresses get a socket that sandbox-run connected from the
	// host in place of their own (the kernel's data path; bwrap only):
	// judged and audited the same, but the bytes never pass sandbox-run
	// (the audit's egress_end says "handed-off", with no counts), and
	// getsockname on such a socket shows the host's source address.
	Brokered bool `json:"brokered,omitempty"`
	// BrokerReason says why they do not, when transparent egress is on
	// and they do not.
	BrokerReason string `json:"broker_reason,omitempty"`
}

// HandInReport is what a run handed in from the host: each relayed by
// sandbox-run on the host side and audited.
type HandInReport struct {
	// SSHAgent is the agent socket handed in through the filter (keys
	// listed, signatures made; nothing else), at SSHAgentInside.
	SSHAgent       string `json:"ssh_agent,omitempty"`
	SSHAgentInside string `json:"ssh_agent_inside,omitempty"`
	// KnownHosts is the known_hosts file bound read-only at
	// KnownHostsInside (GIT_SSH_COMMAND points ssh at it).
	KnownHosts       string `json:"known_hosts,omitempty"`
	KnownHostsInside string `json:"known_hosts_inside,omitempty"`
	// Sockets are the named Unix sockets handed in at their own paths.
	Sockets []SocketHandIn `json:"sockets,omitempty"`
	// HostPorts are host loopback services reachable inside at the same
	// address; Published are servers inside reachable on the host.
	HostPorts []string          `json:"host_ports,omitempty"`
	Published []PublishedReport `json:"published,omitempty"`
}

// SocketHandIn is one named socket handed in.
type SocketHandIn struct {
	// Path is the host socket, at the same path inside.
	Path string `json:"path"`
	// Unsafe is set for a socket that grants host root, handed in because
	// --unix-socket-unsafe named it; Why says how it was recognised.
	Unsafe bool   `json:"unsafe,omitempty"`
	Why    string `json:"why,omitempty"`
}

// PublishedReport is one published port.
type PublishedReport struct {
	Inside int    `json:"inside"` // the server's port inside (127.0.0.1)
	Host   string `json:"host"`   // where the host reaches it
}

// ImageReport names the image a run's root file system came from.
type ImageReport struct {
	// Reference is the image as given (NAME or NAME@sha256:…).
	Reference string `json:"reference"`
	// Digest is the pinned digest, else the manifest digest podman
	// reports for the stored image.
	Digest string `json:"digest"`
	// ID is podman's image ID (its config's digest): the tree that ran.
	ID string `json:"id"`
}

// WalkReport says what a walk of the writable directories for git
// directories (at the run's start: protect_walk; after it: sweep) looked
// at, what it found and what it skipped, and why.
type WalkReport struct {
	// Dirs and Entries are the directories listed and the entries read.
	Dirs    int `json:"dirs"`
	Entries int `json:"entries"`
	// GitDirs counts the git and common directories found inside the
	// writable directories.
	GitDirs int `json:"git_dirs"`
	// Micros is how long the walk took, in microseconds.
	Micros int64 `json:"micros"`
	// Complete is false when the walk left something out (a bound, a
	// directory it could not list); Skipped says what and why.
	Complete bool     `json:"complete"`
	Skipped  []string `json:"skipped,omitempty"`
}

// Quarantined is one thing a command created where a protected path was
// missing, moved out of the user's tree once no run on that directory was
// left (or, for a new git directory's config, rewritten without the
// settings that run a program; the original is what was moved).
type Quarantined struct {
	// Path is where the thing was, absolute.
	Path string `json:"path"`
	// To is where it was moved in sandbox-run's quarantine; "" when it
	// was removed or rewritten in place (Why says which).
	To string `json:"to"`
	// Why says why it was taken out of the user's tree.
	Why string `json:"why"`
	// Run is the run during which the path was missing at start.
	Run string `json:"run"`
}

// Line is the one line sandbox-run prints on stderr for q.
func (q Quarantined) Line() string {
	if q.To == "" {
		return fmt.Sprintf("sandbox-run: quarantined %s: %s", q.Path, q.Why)
	}
	return fmt.Sprintf("sandbox-run: quarantined %s: %s; moved to %s", q.Path, q.Why, q.To)
}

// LiveGuardReport is the live guard of a Linux run (bwrap, gvisor,
// landlock): the host-side watcher that neutralises, while the run lasts,
// a protected path created where one was missing and a git directory's
// program-running settings (docs/protected-paths.md, "The live window").
type LiveGuardReport struct {
	// Started says whether the guard ran; false (with Lost saying why)
	// means the live window was open for the whole run.
	Started bool `json:"started"`
	// Watches is how many inotify watches it held at the end; Budget is
	// the run's ceiling on them.
	Watches int `json:"watches"`
	Budget  int `json:"budget"`
	// ReadyMicros is the time from the guard's start until its first pass
	// had watched every directory it found; 0 when the run ended first.
	// Until then, what the command made in a directory not yet reached
	// waited for the pass.
	ReadyMicros int64 `json:"ready_micros"`
	// Complete is false when a directory went unwatched (the budget, the
	// user's inotify limits); Lost says why (the first few causes) and
	// Unwatched counts them. What was not watched is neutralised only
	// when the run settles.
	Complete  bool     `json:"complete"`
	Lost      []string `json:"lost,omitempty"`
	Unwatched int      `json:"unwatched,omitempty"`
	// Overflows counts the kernel's event-queue overflows, after each of
	// which the guard looked at every directory again.
	Overflows int `json:"overflows,omitempty"`
	// Neutralised counts what it moved or stripped while the run lasted
	// (each also in Quarantined and the audit's live_quarantine events).
	Neutralised int `json:"neutralised"`
}

// Protection is one protection of a run: whether it was configured and,
// where the kernel's own view could be read from inside the sandbox,
// whether that view confirms it. Verified is nil when nothing could be read
// back for it; the report never turns "configured" into "verified" by
// assumption.
type Protection struct {
	// Name is the protection: user_namespace, no_new_privs, seccomp,
	// capabilities_dropped, ...
	Name string `json:"name"`
	// Configured is set when sandbox-run asked for it.
	Configured bool `json:"configured"`
	// Verified is what the read-back from inside says: true confirmed,
	// false contradicted, null not read.
	Verified *bool `json:"verified"`
	// Detail says what was read back, or why nothing was.
	Detail string `json:"detail,omitempty"`
}

// Exit classifies how a run ended. A report without one is of a run whose
// command never started, or of a dry run.
type Exit struct {
	// Code is the exit status sandbox-run exits with (see ExitCode).
	Code int `json:"code"`
	// Class says how the run ended (see the ExitClass constants).
	Class ExitClass `json:"class"`
	// Reason says in one line why sandbox-run ended the command (a limit,
	// the timeout, ctx, the mechanism killed); "" when it ended on its own
	// or could not be started.
	Reason string `json:"reason,omitempty"`
	// Usage and Limit are what the limit that ended the run measured and
	// allowed (bytes of memory, tasks, nanoseconds of CPU time); 0 for
	// any other end, or when the kernel ended it before a measure.
	Usage int64 `json:"usage,omitempty"`
	Limit int64 `json:"limit,omitempty"`
}

// ExitClass names how a run ended, in one style (snake case) across
// mechanisms.
type ExitClass string

// The classes of Exit. Each maps to exit codes as ExitCode says.
const (
	ClassExited          ExitClass = "exited"           // the command's own status
	ClassSignaled        ExitClass = "signaled"         // 128+N: a signal N that no limit explains
	ClassTimedOut        ExitClass = "timed_out"        // 124: the policy's timeout ended the sandbox
	ClassMemoryLimit     ExitClass = "memory_limit"     // 128+9: --memory ended the sandbox
	ClassPidsLimit       ExitClass = "pids_limit"       // 128+9: --pids ended the sandbox
	ClassCPULimit        ExitClass = "cpu_limit"        // 128+9 or 128+24: --cpu-time ended the sandbox
	ClassNotFound        ExitClass = "not_found"        // 127: the command was not found inside
	ClassNotExecutable   ExitClass = "not_executable"   // 126: found, but not executable inside
	ClassMechanismKilled ExitClass = "mechanism_killed" // 125: the mechanism was killed from outside
	ClassCancelled       ExitClass = "cancelled"        // the caller's ctx ended the sandbox (128+9)
	ClassSweepIncomplete ExitClass = "sweep_incomplete" // 125: the command ended, but the sweep after it could not walk everything
)

// TmpfsReport is one file system in memory that the sandbox mounts.
type TmpfsReport struct {
	// Path is where it is mounted inside.
	Path string `json:"path"`
	// Size is the ceiling in bytes; 0 means none (see Enforced).
	Size int64 `json:"size"`
	// Enforced says how the ceiling is held: the tmpfs size= option set
	// through bwrap --size, read-only, or "none: ..." with the reason.
	Enforced string `json:"enforced"`
}

// ReadScanReport is the search of the --read paths (read_scan) or of the
// writable directories (write_scan) for Unix sockets and FIFOs, which no
// mount flag stops the command from using.
type ReadScanReport struct {
	// Paths is how many paths were searched, Entries how many entries
	// were looked at, Seconds how long that took.
	Paths   int     `json:"paths"`
	Entries int     `json:"entries"`
	Seconds float64 `json:"seconds"`
	// Covered lists, as seen inside, each socket and FIFO found; each one
	// has /dev/null bound over it. One made after the search is not covered.
	Covered []string `json:"covered,omitempty"`
}

// Limit is one resource limit and how it was enforced.
type Limit struct {
	// Name is the limit: memory, pids, nofile, fsize, cpu_time, core,
	// tmp_size, inotify_instances, inotify_watches, ...
	Name string `json:"name"`
	// Value is the limit as a number in its unit (bytes, count,
	// seconds) or "none".
	Value    string `json:"value"`
	Enforced string `json:"enforced"` // cgroup, rlimit, sampled, timer, none
	// Source says where the value comes from: "default" for a ceiling
	// every run has unless told otherwise (memory, pids, the inotify
	// ceilings), "policy" for one a flag or profile set; "" for core
	// dumps, which are always off.
	Source string `json:"source,omitempty"`
}

// The sources of a Limit's value.
const (
	SourceDefault = "default"
	SourcePolicy  = "policy"
)

// ReportSchema names the version of the report's format. Fields are added
// within a version (a harness ignores what it does not know); a field
// removed, renamed or changed in meaning is a new version.
const ReportSchema = "sandbox-run/report/v1"

// Report is what was in force. It never claims more than was set up; the
// Readback part is what the kernel told init from inside.
type Report struct {
	// Schema names the report's format, ReportSchema: a harness that
	// parses reports checks it (docs/report.schema.json is its schema).
	Schema string `json:"schema"`
	// RunID names the run in the audit log and in the names of what it
	// leaves on the host (quarantine entries, journals).
	RunID string `json:"run_id"`
	// Tier is the isolation tier: 0 (--sandbox off, a plain process), 1
	// (bwrap, landlock, seatbelt), 2 (gvisor: a kernel of its own).
	Tier int `json:"tier"`
	// Mechanism names what enforced the policy: bwrap, landlock,
	// gvisor, seatbelt or none.
	Mechanism string `json:"mechanism"`
	// Platform is sandbox-run's GOOS/GOARCH.
	Platform string `json:"platform"`
	// Bwrap names the bubblewrap used; nil for other mechanisms.
	Bwrap *BwrapReport `json:"bwrap,omitempty"`
	// Gvisor names the runsc of a tier-2 run; nil otherwise.
	Gvisor *GvisorReport `json:"gvisor,omitempty"`
	// Image names the container image that was the root file system
	// (run --image); nil when the host's was.
	Image *ImageReport `json:"image,omitempty"`
	// Namespaces lists the namespaces the sandbox has of its own (user,
	// mount, pid, net, ipc, uts, cgroup); empty when it has none.
	Namespaces []string `json:"namespaces,omitempty"`
	// HostUID and HostGID are the host's ids the command runs as: under a
	// sandbox started as root an unprivileged uid (65534 unless --user
	// says otherwise), at tier 0 the caller's.
	HostUID int `json:"host_uid"`
	HostGID int `json:"host_gid"`
	// Seccomp is the filter installed; nil when there is none (tier 0,
	// seatbelt, gvisor, whose own kernel serves the calls).
	Seccomp *SeccompReport `json:"seccomp,omitempty"`
	// Writable lists the directories the command may write: the workdir
	// and each --write, absolute.
	Writable []string `json:"writable"`
	// ReadOnly lists the --read paths.
	ReadOnly []string `json:"read_only,omitempty"`
	// Protected lists the protected paths that existed at start, held
	// read-only although inside a writable directory.
	Protected []string `json:"protected,omitempty"`
	// Watched lists the protected paths that were missing at start:
	// what the command creates there is moved to the quarantine as it
	// appears (LiveGuard), and in any case once the last run on their
	// directory has ended.
	Watched []string `json:"watched,omitempty"`
	// Copied lists the protected paths that existed at start but could
	// not be held read-only (--sandbox landlock): writable during the
	// run; once the last run on their directory has ended, a changed one
	// is quarantined and the copy taken at start put back.
	Copied []string `json:"copied,omitempty"`
	// ProtectWalk is the start-up walk for git directories (Linux).
	ProtectWalk *WalkReport `json:"protect_walk,omitempty"`
	// Quarantined lists what was moved out of the writable directories
	// by this run: at its start (of ended runs), while it ran (the live
	// guard) or at its end.
	Quarantined []Quarantined `json:"quarantined,omitempty"`
	// LiveGuard is the watcher that neutralised, while the run lasted,
	// what the command made at protected paths (Linux; nil elsewhere and
	// when the command never ran).
	LiveGuard *LiveGuardReport `json:"live_guard,omitempty"`
	// Sweep is what the walks for git directories that this run made to
	// neutralise ended runs (its own at its end, others' at its start or
	// end) covered, added up (Linux); nil when it settled none. When it is
	// not complete, a repository past its bounds was not neutralised and
	// the run exits 125 (Exit.Class sweep_incomplete).
	Sweep *WalkReport `json:"sweep,omitempty"`
	// TmpSize is the ceiling in bytes of the private /tmp; 0 when none
	// is set (see Tmpfs for how each file system in memory is held).
	TmpSize int64 `json:"tmp_size,omitempty"`
	// Tmpfs lists every file system in memory that the sandbox mounts
	// writable or holds read-only, with its ceiling and how it is held.
	Tmpfs []TmpfsReport `json:"tmpfs,omitempty"`
	// ReadScan is the search of the --read paths for sockets and FIFOs
	// (Linux, when there are --read paths).
	ReadScan *ReadScanReport `json:"read_scan,omitempty"`
	// WriteScan is the same search of the workdir and --write dirs
	// (bwrap only).
	WriteScan *ReadScanReport `json:"write_scan,omitempty"`
	// BindsByFD is set when every bind's source was handed to bwrap as a
	// descriptor opened and vetted by sandbox-run (no path bwrap resolves
	// again after the check).
	BindsByFD bool `json:"binds_by_fd"`
	// Network is the way out: "none", "proxy (built-in)", "proxy
	// (socket PATH)" for a node-wide proxy, or "host" at tier 0.
	Network string `json:"network"`
	// AllowHosts is the egress allow-list as given.
	AllowHosts []string `json:"allow_hosts,omitempty"`
	// TLS says which hosts the proxy terminates (--allow-http) and how
	// the sandbox trusts the run's CA; nil when none is terminated.
	TLS *TLSReport `json:"tls,omitempty"`
	// EnvNames lists the names (never the values) of the variables the
	// command was given.
	EnvNames []string `json:"env"`
	// Notes are one-line remarks on what the run could not do as asked
	// or did differently, each with its reason.
	Notes []string `json:"notes,omitempty"`
	// Egress counts what the built-in egress proxy decided and carried in
	// this run: requests and tunnels allowed and refused, bytes to and from
	// the upstreams. Nil without the built-in proxy (no network, or a
	// node-wide proxy, whose own audit holds the decisions).
	Egress *EgressCounts `json:"egress,omitempty"`
	// Refused lists what the run refused the command, each once with the
	// flag that would allow it (Options.Refusals); empty without one.
	Refused []refusals.Refusal `json:"refused,omitempty"`
	// HandIn is what the run handed in from the host (the ssh-agent,
	// named sockets, host ports, published ports); nil for nothing.
	HandIn *HandInReport `json:"hand_in,omitempty"`
	// Transparent says whether a connection made without the proxy
	// variables goes out (judged like the proxy's), and if not, why; nil
	// when the run has no network.
	Transparent *Transparent `json:"egress_transparent,omitempty"`
	// Secrets lists the credentials kept outside the sandbox (--secret,
	// --llm-key-env): names, hosts and sources, never a value.
	Secrets []SecretReport `json:"secrets,omitempty"`
	// FullFilesystems lists the writable directories whose file system
	// was full when the command ended (Linux only).
	FullFilesystems []string `json:"full_filesystems,omitempty"`
	// Readback is what the sandbox's init read from inside; nil when the
	// command never started or the mechanism reads nothing back (tier 0,
	// seatbelt, landlock, which has its own in Landlock).
	Readback *Readback `json:"readback,omitempty"`
	// Protections lists each protection, configured and verified.
	Protections []Protection `json:"protections"`
	// Limits lists each resource limit and how it was held.
	Limits []Limit `json:"limits,omitempty"`
	// OOMScoreAdj is the oom_score_adj of the sandbox's processes as read
	// back from /proc once sandbox-run set it (limits.OOMScoreAdj, so
	// that the host's OOM killer ends the sandbox first): the command's
	// process, or runsc's under gvisor (the lowest of them). Nil when it
	// could not be read; the report never assumes it.
	OOMScoreAdj *int `json:"oom_score_adj,omitempty"`
	// TimeoutSec is --timeout in seconds; 0 when none.
	TimeoutSec float64 `json:"timeout_seconds,omitempty"`
	// Exit says how the run ended; nil for a dry run or a command that
	// never started.
	Exit *Exit `json:"exit,omitempty"`
	// Landlock is the landlock mechanism's ruleset and read-back; nil for
	// every other mechanism.
	Landlock *LandlockReport `json:"landlock,omitempty"`
	// Losses are what the mechanism, by its nature, cannot hold that
	// tier 1 with bwrap holds, each named (landlock: no PID or network
	// namespace, ...); empty when it loses nothing against bwrap.
	Losses []Loss `json:"losses,omitempty"`
	// EnvironmentDigest lets a harness pin the environment it accepts.
	EnvironmentDigest string `json:"environment_digest"`
	// Developer is what of the caller's own setup the command got (see
	// DeveloperReport); nil when it got none.
	Developer *DeveloperReport `json:"developer,omitempty"`
}

// Readback is the kernel's view of the sandbox's confinement just before
// the command started: read by sandbox-run's init from inside, or, on
// bwrap's fast path (no init: bwrap's PID 1 and a sh trampoline), by
// sandbox-run from the host through /proc/PID of the trampoline. It is
// init's own type (what init writes on its status line is what the report
// holds), named here for callers; its fields are documented there.
type Readback = initproc.Readback

// Kernel is the kernel as the command sees it: under gVisor, gVisor's.
type Kernel = initproc.Kernel

// LandlockReport is what --sandbox landlock set up.
type LandlockReport struct {
	// ABI is the Landlock ABI the ruleset was built for; KernelABI the
	// kernel's (higher when the kernel is newer than sandbox-run knows).
	ABI       int `json:"abi"`
	KernelABI int `json:"kernel_abi"`
	// NetworkByPort: TCP connect is confined to the run's proxy ports
	// (false: the run has no network, socket() is refused by seccomp).
	NetworkByPort bool `json:"network_by_port"`
	// Scoped: signals and abstract Unix sockets are scoped (ABI >= 6).
	Scoped bool `json:"scoped"`
	// ReadbackNoNewPrivs is NoNewPrivs read on the command's thread just
	// before exec (-1: never read); ReadbackRootDenied says that opening
	// "/" there failed with EACCES, that is, Landlock was in force.
	ReadbackNoNewPrivs int  `json:"readback_no_new_privs"`
	ReadbackRootDenied bool `json:"readback_root_denied"`
}

// Loss is one named thing a mechanism cannot hold against tier 1 with
// bwrap.
type Loss struct {
	// Name is the area: processes, proc, lifetime, signals, network,
	// files, protected_paths, limits, ipc.
	Name string `json:"name"`
	// Detail says what the command can do that it could not under bwrap.
	Detail string `json:"detail"`
}

// EgressCounts is the built-in proxy's tally for one run.
type EgressCounts struct {
	// Allowed and Refused count the requests and tunnels the proxy
	// allowed and refused.
	Allowed int64 `json:"allowed"`
	Refused int64 `json:"refused"`
	// BytesOut and BytesIn count the bytes sent to and received from
	// the upstreams.
	BytesOut int64 `json:"bytes_out"`
	BytesIn  int64 `json:"bytes_in"`
}

// BwrapReport names the bubblewrap that was used.
type BwrapReport struct {
	// Path is the bwrap binary run, absolute.
	Path string `json:"path"`
	// Version is its version, as bwrap --version prints it.
	Version string `json:"version"`
	// Features are the options this bwrap was found to have.
	Features bwrap.Features `json:"features"`
	// Advisories are the known weaknesses of this bwrap, each with its
	// fix; empty when none is known.
	Advisories []Advisory `json:"advisories,omitempty"`
}

// GvisorReport names the runsc that ran a tier-2 sandbox.
type GvisorReport struct {
	// Path is the runsc binary run, absolute.
	Path string `json:"path"`
	// Version is its version, as runsc --version prints it.
	Version string `json:"version"`
	// Platform is how the Sentry intercepts the command's system calls
	// (ptrace, systrap, kvm): runsc's own default, read from `runsc
	// flags` and passed explicitly; "" when runsc names none (then runsc
	// chose, unreported).
	Platform string `json:"platform"`
	// Rootless is set when runsc ran as an unprivileged user.
	Rootless bool `json:"rootless"`
	// HostUDS is set when the command may connect to the host Unix
	// sockets bound in (the forwarded proxies, init's status socket).
	HostUDS bool `json:"host_uds"`
}

// Advisory is a known weakness of the bwrap in use.
type Advisory struct {
	// ID names the weakness (a CVE or sandbox-run's own name for it).
	ID string `json:"id"`
	// Detail says what it lets a command do.
	Detail string `json:"detail"`
	// Fix says what to install or change.
	Fix string `json:"fix"`
}

// SeccompReport says which filter was installed and what the kernel says.
type SeccompReport struct {
	// Digest is the sha256 of the filter program's bytes, which
	// filter's golden files and docs/seccomp.md name.
	Digest string `json:"digest"`
	// Arch is the architecture the program was built for.
	Arch string `json:"arch"`
	// Ptrace is set when --ptrace let ptrace through the filter.
	Ptrace bool `json:"ptrace_allowed"`
	// Readback is the Seccomp field of /proc/self/status inside (2 =
	// filter mode), -1 when the command never started.
	Readback int `json:"readback_mode"`
}

// SecretReport is one credential kept outside the sandbox, as the report
// names it: never its value.
type SecretReport struct {
	// Name is the variable that holds the placeholder inside.
	Name string `json:"name"`
	// Hosts are the hosts the proxy swaps the value in for, over TLS
	// only; empty for an LLM key added by the LLM relay.
	Hosts []string `json:"hosts,omitempty"`
	// From is where the value was read: env:VAR or file:PATH.
	From string `json:"from"`
	// InBody: request bodies are swapped too.
	InBody bool `json:"in_body,omitempty"`
	// By is what puts the value into requests: "egress proxy" or
	// "llm relay".
	By string `json:"by"`
}

// TLSReport says what the built-in egress proxy terminates (--allow-http)
// and how the sandbox was made to trust it. Rules and hosts are named;
// no key or secret value is ever part of it.
type TLSReport struct {
	// Terminated are the host:port pairs whose TLS the proxy terminates
	// with the run's CA; every other host is a plain tunnel.
	Terminated []string `json:"terminated"`
	// Rules are the --allow-http rules in force, as written.
	Rules []string `json:"rules"`
	// UpstreamRoots is "system" or the --upstream-ca file that verifies
	// the terminated hosts.
	UpstreamRoots string `json:"upstream_roots"`
	// CABundle is the path inside of the bundle: the system roots plus
	// the run's CA certificate (never its key).
	CABundle string `json:"ca_bundle"`
	// CAEnv are the variables set to CABundle.
	CAEnv []string `json:"ca_env"`
	// Covered are the system bundle paths the run's bundle is bound over
	// inside, read-only (those the host has).
	Covered []string `json:"covered,omitempty"`
}
