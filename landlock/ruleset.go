// Package landlock translates what a sandbox may touch into a Landlock
// ruleset for one ABI version, and names what that ABI, and Landlock
// without namespaces, cannot hold.
//
// The translation is pure: it reads no system state, so every ABI is
// table-tested on any kernel (go-landlock's own downgrade idea, made
// explicit). The ruleset is built for exactly the ABI asked for, never in
// go-landlock's best-effort mode: a right the kernel lacks is either a
// refusal (ABIError) or a named Loss, never a silent downgrade. Applying
// the ruleset is the caller's: sandbox/landlock_linux.go does it in the
// exec shim, before the command runs.
//
// Guarantees, once applied with the seccomp filter's HostNamespaces
// program: the command reads only ReadDirs, ReadFiles and the write
// paths; it writes, creates, removes, renames and truncates only beneath
// WriteDirs and in WriteFiles; from ABI 4 it connects over TCP only to
// ConnectPorts and binds no TCP port; from ABI 6 it signals no process
// and reaches no abstract Unix socket outside its own Landlock domain.
// Not guaranteed: anything Losses names.
package landlock

import (
	"errors"
	"fmt"
	"strconv"

	ll "github.com/landlock-lsm/go-landlock/landlock"
)

// MinABI is the oldest Landlock ABI the design accepts. Before ABI 3
// (Linux 6.2) Landlock cannot refuse truncation: truncate(2), or open(2)
// with O_TRUNC on a file opened for reading, would empty any file the
// command's uid may write, in --read paths and system directories
// included, and seccomp cannot refuse the second without refusing every
// shell redirection.
const MinABI = 3

// MaxABI is the newest ABI this translation knows. A newer kernel gets a
// ruleset for MaxABI: its newer rights are not handled (ABI 8 and later
// add thread-synchronised enforcement, logging flags and, from 9, rules
// for Unix socket paths, which the seccomp filter refuses anyway).
const MaxABI = 7

// Minimum ABIs of the parts of the design that came later.
const (
	// NetABI handles TCP bind and connect by port (Linux 6.7).
	NetABI = 4
	// ScopeABI scopes signals and abstract Unix sockets to the domain
	// (Linux 6.12).
	ScopeABI = 6
)

// ErrABI is wrapped by every ABIError.
var ErrABI = errors.New("landlock: ABI too old")

// ABIError says that the kernel's Landlock ABI cannot hold what was asked.
type ABIError struct {
	Have, Need int
	// What needs ABI Need.
	What string
}

func (e *ABIError) Error() string {
	have := "no Landlock"
	if e.Have > 0 {
		have = "Landlock ABI " + strconv.Itoa(e.Have)
	}
	return fmt.Sprintf("%s needs Landlock ABI %d (%s); this kernel has %s", e.What, e.Need, KernelFor(e.Need), have)
}

func (e *ABIError) Unwrap() error { return ErrABI }

// KernelFor names the first Linux release with ABI abi.
func KernelFor(abi int) string {
	switch abi {
	case 1:
		return "Linux 5.13"
	case 2:
		return "Linux 5.19"
	case 3:
		return "Linux 6.2"
	case 4:
		return "Linux 6.7"
	case 5:
		return "Linux 6.10"
	case 6:
		return "Linux 6.12"
	case 7:
		return "Linux 6.15"
	}
	return "a newer Linux"
}

// Input is what the command may reach, resolved by the caller: which paths
// exist and whether each is a directory (a file gets file rights only, as
// the kernel requires).
type Input struct {
	// ABI is the kernel's Landlock ABI version (0: none).
	ABI int
	// ReadDirs and ReadFiles may be read, and their files executed.
	ReadDirs, ReadFiles []string
	// WriteDirs may be read, written and changed beneath; WriteFiles read
	// and written (device files such as /dev/null).
	WriteDirs, WriteFiles []string
	// ConnectPorts are the loopback TCP ports of the run's proxies. Nil:
	// the run has no network, and the seccomp filter refuses socket().
	ConnectPorts []uint16
}

// Loss is one thing tier 1 (bwrap) holds that this ruleset does not.
type Loss struct {
	// Name is the area, as the report and check name it: "processes",
	// "proc", "lifetime", "signals", "network", "files",
	// "protected_paths", "limits", "ipc".
	Name string `json:"name"`
	// Detail says what the command can do that it could not under bwrap.
	Detail string `json:"detail"`
}

// Ruleset is the translation for one ABI.
type Ruleset struct {
	// ABI is the version the ruleset is built for: Input.ABI, capped at
	// MaxABI.
	ABI int
	// Config is go-landlock's exact configuration for ABI (not best
	// effort): every right of that ABI is handled.
	Config ll.Config
	// Rules grant access; everything else handled is denied.
	Rules []ll.Rule
	// Network says whether TCP connect is confined by port (ABI >= 4 and
	// ConnectPorts set); without a network socket() is refused by seccomp
	// instead.
	Network bool
	// Scoped says whether signals and abstract Unix sockets are scoped.
	Scoped bool
	// Losses are what this ABI, without namespaces, cannot hold.
	Losses []Loss
}

// configs are go-landlock's exact configurations, by ABI.
var configs = map[int]ll.Config{3: ll.V3, 4: ll.V4, 5: ll.V5, 6: ll.V6, 7: ll.V7}

// Translate builds the ruleset for in. It returns an *ABIError (errors.Is
// ErrABI) when in.ABI is below MinABI, or when the run needs a network and
// in.ABI is below NetABI (TCP could reach any address).
func Translate(in Input) (*Ruleset, error) {
	if in.ABI < MinABI {
		return nil, &ABIError{Have: in.ABI, Need: MinABI, What: "--sandbox landlock (refusing truncation outside the writable dirs)"}
	}
	abi := min(in.ABI, MaxABI)
	if in.ConnectPorts != nil && abi < NetABI {
		return nil, &ABIError{Have: in.ABI, Need: NetABI, What: "a network under --sandbox landlock (TCP connect only to the proxy's port)"}
	}
	rs := &Ruleset{ABI: abi, Config: configs[abi], Network: in.ConnectPorts != nil, Scoped: abi >= ScopeABI}
	if len(in.ReadDirs) > 0 {
		rs.Rules = append(rs.Rules, ll.RODirs(in.ReadDirs...))
	}
	if len(in.ReadFiles) > 0 {
		rs.Rules = append(rs.Rules, ll.ROFiles(in.ReadFiles...))
	}
	if len(in.WriteDirs) > 0 {
		// Refer lets files move between directories beneath the writable
		// dirs (atomic writes through a temporary directory); Landlock
		// still refuses a move that would gain rights.
		rs.Rules = append(rs.Rules, ll.RWDirs(in.WriteDirs...).WithRefer())
	}
	if len(in.WriteFiles) > 0 {
		rs.Rules = append(rs.Rules, ll.RWFiles(in.WriteFiles...))
	}
	for _, p := range in.ConnectPorts {
		rs.Rules = append(rs.Rules, ll.ConnectTCP(p))
	}
	rs.Losses = losses(abi, rs.Network)
	return rs, nil
}

// losses names what a run at abi, without user, PID, network, mount and
// IPC namespaces, cannot hold that bwrap holds.
func losses(abi int, network bool) []Loss {
	out := []Loss{
		{"processes", "no PID namespace: the command sees the host's processes in /proc (command lines and status; their environments and memory stay out of reach, Landlock denies ptrace-class access outside its domain)"},
		{"proc", "/proc is the host's, granted as one hierarchy: host-wide files the uid may read (/proc/keys of its own keys, timer_list, ...) are readable"},
		{"lifetime", "no PID namespace: when sandbox-run itself is killed (SIGKILL), the command and its descendants keep running; otherwise sandbox-run, their subreaper, ends them with the run"},
	}
	if abi < ScopeABI {
		out = append(out, Loss{"signals", "Landlock ABI " + strconv.Itoa(abi) + " < 6: the command can signal every process of its uid"})
	}
	if network {
		out = append(out,
			Loss{"network", "no network namespace: a server on the proxy's port at any address is reachable"},
			Loss{"network", "the egress proxy listens on a host loopback port: other local processes can use it while the run lasts"},
			Loss{"network", "no transparent egress: without a network namespace there is no TUN device to route through, so a tool that ignores the HTTP proxy variables (ssh, git over SSH, a database client) cannot connect, and names are resolved by the host's resolver, not the sandbox's"})
	}
	out = append(out,
		Loss{"network", "no TCP port can be bound: the command cannot run a server, not even on loopback"},
		Loss{"files", "no mount namespace: no private /tmp or /dev/shm (TMPDIR is a per-run directory, removed after the run), and only /dev/null, /dev/zero, /dev/full, /dev/random and /dev/urandom of /dev; a FIFO a host process left in a writable dir can be opened (bwrap covers each with /dev/null)"},
		Loss{"protected_paths", "Landlock grants are additive beneath a writable dir: every existing protected path (an existing .git's config and hooks included) is writable while the run lasts (the live window: a host tool that runs there meanwhile sees the command's changes, and .git can be renamed and replaced); what appears at a missing one, and a new git directory's config and hooks, are neutralised as they appear by sandbox-run's live guard, within its measured bound; when the last run on the directory ends, changes are quarantined and the copies taken at the start put back"},
		Loss{"limits", "no user namespace: RLIMIT_NPROC would count every process of the uid, so the process ceiling is sampled from /proc, and a double-forked process is counted only while sandbox-run, its subreaper, finds it"},
		Loss{"ipc", "no IPC or UTS namespace: System V IPC and POSIX message queues are refused by seccomp; the hostname is the host's"},
	)
	return out
}
