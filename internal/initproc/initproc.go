// Package initproc is sandbox-run's own init inside the sandbox: the
// process bwrap starts as PID 1 of the sandbox's PID namespace.
//
// It runs under the hidden first argument Arg, in sandbox-run re-executed
// or in sandbox-run-init (cmd/sandbox-run-init), a binary that links only
// this package and so starts sooner. It is not a command for people: its
// flags are descriptor numbers that only the outer sandbox-run can arrange.
//
// # Stages
//
//  1. bwrap has set up namespaces, mounts, the environment and the seccomp
//     filter, dropped capabilities and started this init as PID 1.
//  2. Init marks every descriptor above 2 close-on-exec, so nothing bwrap
//     or the caller left open reaches the command. Under gVisor with
//     transparent egress (Config.Tun) it then makes the TUN device with
//     the CAP_NET_ADMIN the spec grants init alone, starts relaying its
//     packets to the launcher, and drops every capability of every
//     thread; the command never starts if any of it fails. It reads back
//     what the kernel says about its own confinement, and starts the
//     command with the real standard error.
//  3. It reports (on the status descriptor, then closed) that the command
//     started, or why it could not (127 not found, 126 not executable).
//  4. It relays SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the
//     command's process group, reaps every orphan, and exits with the
//     command's status (128+N for a signal) the moment the command ends.
//     As PID 1 leaving, it takes every other process of the sandbox with it.
package initproc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/tun"
)

// Arg is the hidden first argument that selects init mode.
const Arg = "__sandbox-init"

// ExecArg selects the exec shim: a process that applies the run's rlimits
// to itself and then becomes the command, so that init, which relays
// connections and signals, is not held to the command's limits.
const ExecArg = "__sandbox-exec"

// Modes are init's hidden modes by name, Arg and ExecArg, and the
// network namespace helper the launcher starts before bwrap
// (tun.HelperArg), each with the function that serves it (given the
// arguments after the name; it returns the exit status). sandbox-run and
// sandbox-run-init both serve exactly these, so either binary can be init,
// the exec shim init starts, and the helper.
func Modes() map[string]func(args []string) int {
	return map[string]func([]string) int{Arg: Main, ExecArg: ExecMain, tun.HelperArg: tun.HelperMain}
}

// Status is what init reports on its status descriptor, as one JSON line.
type Status struct {
	Started bool   `json:"started"`
	Error   string `json:"error,omitempty"`
	// Reason is why the command could not start (Exit 126 or 127),
	// without its name: what Error says after "NAME: ".
	Reason   string    `json:"reason,omitempty"`
	Exit     int       `json:"exit,omitempty"`
	Readback *Readback `json:"readback,omitempty"`
}

// Readback is the kernel's view of the sandbox's confinement just before
// the command started: read by init from inside, or, on bwrap's fast path
// (no init: bwrap's PID 1 and a sh trampoline), by sandbox-run from the
// host through /proc/PID of the trampoline, the process that becomes the
// command, while it waits for sandbox-run's go. It is the one read-back
// type: init writes it on its status line and the report holds it
// (report.Readback names it); its fields are part of the report's
// contract (its JSON Schema reads these comments).
type Readback struct {
	// PID is the reader's pid inside: init's (1 with a PID namespace) or
	// the trampoline's (2, a child of bwrap's PID 1); -1 when unread.
	PID int `json:"pid"`
	// UID and GID are the ids it runs as (bwrap maps them to the same
	// ids inside as on the host); -1 when unread.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// NoNewPrivs is /proc/self/status's NoNewPrivs (1: set).
	NoNewPrivs int `json:"no_new_privs"`
	// Seccomp is its Seccomp field (2: filter mode).
	Seccomp int `json:"seccomp"`
	// CapEff and CapBnd are the effective and bounding capability sets,
	// hex as the kernel writes them ("0000000000000000": none).
	CapEff string `json:"cap_eff"`
	CapBnd string `json:"cap_bnd"`
	// UIDMap is its uid_map, fields joined by single spaces: the whole
	// file as init reads it inside, or its first line as the host reads
	// it on the fast path (the second field then the host's uid); ""
	// when unread.
	UIDMap string `json:"uid_map"`
	// Namespaces maps a namespace's name to its link (net:[4026...]);
	// nil when unread. Where sandbox-run may not read the sandbox's links
	// (root without CAP_SYS_PTRACE, in a container), a namespace is the
	// inode bwrap reported in the same form, and the user namespace
	// "user:uid_map=" and the first line of the command's own uid_map,
	// present only when that differs from sandbox-run's. A namespace
	// missing here was not shown to be the sandbox's own.
	Namespaces map[string]string `json:"namespaces"`
	// Kernel is what the kernel serving the command says it is; read only
	// under gvisor (tier 2), nil otherwise.
	Kernel *Kernel `json:"kernel,omitempty"`
}

// ParseStatus fills rb from the text of a /proc/PID/status file:
// NoNewPrivs, Seccomp, CapEff, CapBnd, and UID and GID from the first
// (real) id of the Uid and Gid lines. The kernel writes the ids as the
// reader's user namespace sees them. A field the text lacks keeps its
// value in rb.
func (rb *Readback) ParseStatus(b []byte) {
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch string(k) {
		case "NoNewPrivs":
			rb.NoNewPrivs, _ = strconv.Atoi(string(v))
		case "Seccomp":
			rb.Seccomp, _ = strconv.Atoi(string(v))
		case "CapEff":
			rb.CapEff = string(v)
		case "CapBnd":
			rb.CapBnd = string(v)
		case "Uid", "Gid":
			f := bytes.Fields(v)
			if len(f) == 0 {
				continue
			}
			if id, err := strconv.Atoi(string(f[0])); err == nil && k[0] == 'U' {
				rb.UID = id
			} else if err == nil {
				rb.GID = id
			}
		}
	}
}

// Kernel is the kernel as the command sees it: under gVisor, gVisor's.
type Kernel struct {
	Uname       string `json:"uname"`        // sysname release version machine
	ProcVersion string `json:"proc_version"` // first line of /proc/version
	Dmesg       string `json:"dmesg"`        // first line of the kernel log, "" when unreadable
}

// Config is init's command line, parsed.
type Config struct {
	StatusFD int
	// StatusSocket, when set, replaces StatusFD: init connects to this
	// Unix socket and reports there (runsc passes no descriptor but 0-2
	// into the sandbox). StderrFD may then be 2.
	StatusSocket string
	StderrFD     int
	Forward      []Forward
	// Publish asks init to serve published ports (forwarder.Publish):
	// Port is the server's port inside, Socket the host side's socket.
	Publish []Forward
	// Rlimits is the command's rlimits, applied by the exec shim between
	// init and the command; nil means only core dumps off (init's own).
	Rlimits []limits.Rlimit
	// TTY makes descriptor 0 (a pseudo-terminal) the command's controlling
	// terminal: the command leads a new session, so a shell gets job
	// control and the terminal's signals (Ctrl-C, Ctrl-Z) reach its
	// foreground job.
	TTY bool
	// GateFD, when above 2, is a descriptor init reads before it starts
	// the command, after it wrote "ready" and a newline on the status
	// descriptor: "go" lets it start; anything else (an end of file: the
	// launcher gave up) ends init with status 125 and the command never
	// runs. The launcher uses it to set up from outside what must hold
	// before the command's first instruction: the sandbox's network
	// (transparent egress) and the inotify ceiling of its user namespace.
	GateFD int
	// BrokerFD, when above 2, is a socket on which the exec shim hands
	// the launcher the listener of the connect broker's filter
	// (internal/connbroker), or its reason for not installing it; init
	// passes it to the shim alone and closes its own.
	BrokerFD int
	// Tun, when set, asks init to make the TUN device of transparent
	// egress itself (tier 2, where the device is gVisor's and cannot be
	// made from outside): see Tun.
	Tun     *Tun
	Command []string
}

// Tun is transparent egress made from inside: init creates the TUN
// device tun0 with CAP_NET_ADMIN (the only capability the launcher
// grants it), gives it Addr, which also routes Addr's prefix through it
// (a /0 is every destination), relays each packet between the device and
// the packet socket Socket (whose other end is the launcher's netstack,
// which judges every connection), and drops every capability of every
// thread before it starts the command. Linux only.
type Tun struct {
	Addr   netip.Prefix
	Socket string
}

// Forward asks init to listen on a loopback TCP port and relay each
// connection to a Unix socket bound into the sandbox.
type Forward struct {
	Port   int
	Socket string
	// Addr, when set, is the one loopback address init listens on
	// (a --host-port ADDR:PORT); empty means 127.0.0.1 and ::1.
	Addr string
}

// spec is f as init's command line writes it: [ADDR:]PORT=SOCKET, with
// an IPv6 ADDR in brackets.
func (f Forward) spec() string {
	port := strconv.Itoa(f.Port)
	if f.Addr != "" {
		port = net.JoinHostPort(f.Addr, port)
	}
	return port + "=" + f.Socket
}

// ErrUsage marks a malformed init or exec shim command line.
var ErrUsage = errors.New("initproc: usage")

// BrokerMark, first after ExecArg, asks the exec shim to put the connect
// broker's filter on and hand its listener over on descriptor 3
// (Config.BrokerFD; internal/connbroker) before it becomes the command.
const BrokerMark = "--connect-broker"

// ExecArgs is the command line (after the binary's own path) on which
// sandbox-run's binary becomes the exec shim: it applies rs to itself and
// then executes path with argv (argv[0] included).
func ExecArgs(rs []limits.Rlimit, path string, argv []string) []string {
	return append([]string{ExecArg, encodeRlimits(rs), path}, argv...)
}

// Args renders c as init's command line (after Arg).
func (c Config) Args() []string {
	a := []string{"--status-fd", fmt.Sprint(c.StatusFD), "--stderr-fd", fmt.Sprint(c.StderrFD)}
	if c.StatusSocket != "" {
		a = []string{"--status-socket", c.StatusSocket, "--stderr-fd", fmt.Sprint(c.StderrFD)}
	}
	for _, f := range c.Forward {
		a = append(a, "--forward", f.spec())
	}
	for _, f := range c.Publish {
		a = append(a, "--publish", f.spec())
	}
	if len(c.Rlimits) > 0 {
		a = append(a, "--rlimits", encodeRlimits(c.Rlimits))
	}
	if c.TTY {
		a = append(a, "--tty")
	}
	if c.GateFD > 2 {
		a = append(a, "--gate-fd", fmt.Sprint(c.GateFD))
	}
	if c.BrokerFD > 2 {
		a = append(a, "--broker-fd", fmt.Sprint(c.BrokerFD))
	}
	if c.Tun != nil {
		a = append(a, "--tun", c.Tun.Addr.String()+"="+c.Tun.Socket)
	}
	a = append(a, "--")
	return append(a, c.Command...)
}

// ParseArgs is the inverse of Config.Args.
func ParseArgs(args []string) (Config, error) {
	c := Config{StatusFD: -1, StderrFD: -1}
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--":
			c.Command = args[i+1:]
			return c, c.complete()
		case "--tty":
			c.TTY = true
		case "--status-fd", "--stderr-fd", "--forward", "--publish", "--rlimits", "--status-socket", "--gate-fd", "--broker-fd", "--tun":
			if i+1 >= len(args) {
				return c, fmt.Errorf("%w: %s needs a value", ErrUsage, args[i])
			}
			if err := c.set(args[i], args[i+1]); err != nil {
				return c, err
			}
			i++
		default:
			return c, fmt.Errorf("%w: unknown argument %q", ErrUsage, args[i])
		}
	}
	return c, fmt.Errorf("%w: missing -- COMMAND", ErrUsage)
}

// set applies one flag of init's command line and its value v.
func (c *Config) set(flag, v string) error {
	switch flag {
	case "--status-fd":
		if _, err := fmt.Sscan(v, &c.StatusFD); err != nil {
			return fmt.Errorf("%w: --status-fd %q", ErrUsage, v)
		}
	case "--stderr-fd":
		if _, err := fmt.Sscan(v, &c.StderrFD); err != nil {
			return fmt.Errorf("%w: --stderr-fd %q", ErrUsage, v)
		}
	case "--rlimits":
		rs, err := parseRlimits(v)
		if err != nil {
			return err
		}
		c.Rlimits = rs
	case "--status-socket":
		c.StatusSocket = v
	case "--gate-fd":
		if _, err := fmt.Sscan(v, &c.GateFD); err != nil || c.GateFD < 3 {
			return fmt.Errorf("%w: --gate-fd %q", ErrUsage, v)
		}
	case "--broker-fd":
		if _, err := fmt.Sscan(v, &c.BrokerFD); err != nil || c.BrokerFD < 3 {
			return fmt.Errorf("%w: --broker-fd %q", ErrUsage, v)
		}
	case "--tun":
		t, err := parseTun(v)
		if err != nil {
			return err
		}
		c.Tun = t
	case "--forward", "--publish":
		f, err := parseForward(flag, v)
		if err != nil {
			return err
		}
		if flag == "--publish" {
			c.Publish = append(c.Publish, f)
		} else {
			c.Forward = append(c.Forward, f)
		}
	}
	return nil
}

// parseForward reads --forward's or --publish's [ADDR:]PORT=SOCKET.
func parseForward(flag, v string) (Forward, error) {
	port, sock, ok := strings.Cut(v, "=")
	var f Forward
	if h, p, err := net.SplitHostPort(port); err == nil && h != "" {
		f.Addr, port = h, p
	}
	n, err := strconv.Atoi(port)
	if err != nil || !ok || sock == "" || n <= 0 || n > 65535 {
		return f, fmt.Errorf("%w: %s %q, want [ADDR:]PORT=SOCKET", ErrUsage, flag, v)
	}
	f.Port, f.Socket = n, sock
	return f, nil
}

// parseTun reads --tun's ADDR/BITS=SOCKET (IPv4).
func parseTun(v string) (*Tun, error) {
	addr, sock, _ := strings.Cut(v, "=")
	pf, err := netip.ParsePrefix(addr)
	if err != nil || !pf.Addr().Is4() || sock == "" {
		return nil, fmt.Errorf("%w: --tun %q, want ADDR/BITS=SOCKET (IPv4)", ErrUsage, v)
	}
	return &Tun{Addr: pf, Socket: sock}, nil
}

// complete checks a parsed command line once "--" is reached: a command,
// and a place to report (both descriptors, or the status socket and
// standard error).
func (c *Config) complete() error {
	switch {
	case len(c.Command) == 0:
		return fmt.Errorf("%w: no command after --", ErrUsage)
	case c.StatusSocket != "" && c.StatusFD < 0 && c.StderrFD >= 2:
		return nil
	case c.StatusFD < 3 || c.StderrFD < 3:
		return fmt.Errorf("%w: --status-fd and --stderr-fd are required", ErrUsage)
	}
	return nil
}

// DecodeStatus reads init's status line.
func DecodeStatus(b []byte) (Status, error) {
	var s Status
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("initproc: status %q: %w", b, err)
	}
	return s, nil
}
