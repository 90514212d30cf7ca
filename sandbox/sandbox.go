// Package sandbox runs one command under a policy, start to finish, and says
// exactly which protections were in force.
//
// On Linux the command runs under bubblewrap (tier 1): its own user, mount,
// PID, IPC, UTS and network namespaces, the system read-only, only the
// policy's writable directories writable, a private size-capped /tmp and
// /dev/shm, a read-only /dev, no capabilities, a cleared environment passed inside bwrap's --args stream.
// When something is forwarded into the sandbox (the egress proxy, the LLM
// channel) or an rlimit needs applying, sandbox-run's own init is PID 1 and
// runs the forwarders; otherwise bwrap's PID 1 reaps and a POSIX sh
// trampoline of a few builtins reports and execs the command, which saves
// a second Go start. With policy.ModeOff it runs as a plain process with a
// cleared environment (tier 0), and only then. With policy.ModeGvisor
// (tier 2, Linux, only when asked for) the same mount plan becomes an OCI
// bundle (package gvisor) that runsc runs: the command's system calls are
// served by gVisor's kernel; init reports on a status socket with the
// kernel it sees; --memory, --pids and --cpu-time are refused there, and
// binds go by path (runsc has no bind by descriptor).
//
// # Guarantees
//
//   - Never a silent fallback: when tier 1 cannot be set up, Run returns an
//     error wrapping ErrSetup, ErrUnsupported or policy.ErrInvalid and the
//     command does not run.
//   - Nothing of the caller's environment reaches bwrap or the command but
//     what the policy names; values never appear on a command line.
//   - No descriptor reaches the command but 0, 1 and 2.
//   - As root, the command is never host uid 0.
//   - When Run returns, no process of the sandbox is left: its PID 1 (init
//     or bwrap's) takes the PID namespace with it, bwrap dies with the
//     thread that started it, and PID 1 dies with bwrap.
//   - Protected paths inside writable directories, and the config, hooks,
//     commondir and info/attributes of every git directory the start-up
//     walk finds, stay read-only where they exist. Nothing is created in
//     the user's tree; what the command creates at a missing protected
//     path, and a new git directory's hooks and program-running settings,
//     are quarantined once no run on that directory is left.
//   - No writable directory exposes the caller's own state: one that is a
//     system directory, the home (as $HOME and the passwd entry name it),
//     a parent of it, a directory in one of its dot-directories, or
//     BwrapCache (or holds it) is refused with policy.ErrInvalid, at either
//     spelling (see policy.Host); so is one that is or lies in a place the
//     host's users and services share (/tmp, /run, /dev/shm, ...), in /tmp
//     and /var/tmp unless its directory there is the caller's alone.
//   - No path hands in a service: every Unix socket and FIFO under a --read
//     path or in a writable directory when the run starts has /dev/null
//     bound over it (the search is bounded; over the bound the run is
//     refused). The system directories (/usr, /etc) are not searched. A
//     --read never replaces the sandbox's own /proc, /dev or /tmp, nor
//     brings in the host's /sys or /run: such a path is refused.
//   - Every tmpfs the command can write (/tmp, /dev/shm) has a size ceiling
//     where bwrap has --size; the report lists each one and says "none"
//     where it has not.
//   - Run holds the policy's Timeout itself, for every mechanism: the whole
//     sandbox is ended, the Result says 124, the error is a *TimeoutError.
//   - Every limit the report lists is held by the mechanism it names
//     (cgroup, rlimit, sampled, timer); a sampler the plan relies on that
//     cannot start ends the run with a setup error. On Linux every run has
//     a process ceiling, policy.DefaultPids unless the policy names one,
//     and a memory ceiling, half the host's memory unless the policy names
//     one or policy.NoMemoryLimit (under tier 2, gvisor, sampled on runsc's
//     process tree); tier 2 reports the process ceiling as enforced "none"
//     and refuses a named one. Under bwrap
//     every run has an inotify ceiling, set in its user namespace and read
//     back before the command starts; other mechanisms report it "none".
//   - The command's oom_score_adj is limits.OOMScoreAdj (1000) on every
//     Linux mechanism (runsc's processes under gvisor); the report holds
//     the value read back from /proc, never an assumed one.
//
// # Non-guarantees
//
//   - The kernel is shared: a kernel bug reachable through the allowed
//     system calls is an escape. The seccomp filter narrows, not removes,
//     that surface.
//   - What the command writes inside its writable directories is its own
//     business; only the protected paths are held.
//   - A missing protected path is writable while the run (and any
//     concurrent run on the same directory) lasts: the live window. If
//     every such run is killed with SIGKILL, its quarantine waits for the
//     next run of the same user. A git directory past the walk's bounds
//     is not held.
//   - A socket or FIFO made under a --read path or in a writable directory
//     after the run started (by a host process) is reachable; so is one
//     under /usr or /etc. A tmpfs's inode count is not capped (bwrap has no
//     option for it): only a cgroup memory limit bounds the kernel memory of
//     many empty files.
//   - If sandbox-run itself is killed with SIGKILL, the sandbox still dies.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/mechanism/landlock"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/ociimage"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/internal/protect"
	"github.com/sandbox-run/sandbox-run/internal/refusals"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// ErrSetup marks a sandbox that could not be set up; the command did not
// run. Every *SetupError matches it (it is fault.ErrSetup, which bwrap's
// and apparmor's refusals match too).
var ErrSetup = fault.ErrSetup

// SetupError says what failed, why and the fix, in one line
// ("what: why; fix: fix"). It is sandbox-run's one such type
// (internal/fault.Error): bwrap.SetupError and apparmor.Error are the
// same. Err, when set, is the typed error of the package that found the
// cause (a *pathguard.EscapeError), reachable with errors.As.
type SetupError = fault.Error

// ErrTimeout is matched (errors.Is) by a *TimeoutError: the policy's
// Timeout ended the run.
var ErrTimeout = errors.New("sandbox: timed out")

// TimeoutError means the policy's Timeout passed while the sandbox was
// still being set up: the command never ran. (When it passes while the
// command runs, Run returns no error: the report's exit class is
// ClassTimedOut, its reason this error's text.) A deadline or cancellation
// of the caller's own ctx is not a TimeoutError.
type TimeoutError struct {
	Timeout time.Duration
	// Started is false when the timer fired while the sandbox was still
	// being set up: the command never ran.
	Started bool
}

func (e *TimeoutError) Error() string {
	if !e.Started {
		return fmt.Sprintf("timed out after %s before the command started", e.Timeout)
	}
	return fmt.Sprintf("timed out after %s; the whole sandbox was ended", e.Timeout)
}

// Is matches ErrTimeout.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

// ExitTimeout is the exit status of a run that the policy's Timeout ended.
const ExitTimeout = exitcode.Timeout

// Options say how to run, as opposed to the policy, which says what is
// allowed.
type Options struct {
	// BwrapPath is the bubblewrap binary; empty means the first bwrap on
	// the caller's PATH. It is refused when it lies in a writable directory
	// of the policy.
	BwrapPath string
	// RunscPath is gVisor's runsc for policy.ModeGvisor; empty means the
	// first runsc on the caller's PATH. Refused like BwrapPath when it
	// lies in a writable directory.
	RunscPath string
	// BwrapCache is a private directory where what was learnt about a bwrap
	// binary is kept between runs (see bwrap.Detector), and the run
	// journals under runs/; empty probes bwrap on every run and keeps no
	// journal. It is opened without following links and rebuilt when
	// another uid owns it or others may write it, and a writable directory
	// that is, holds or lies in it is refused.
	BwrapCache string
	// DataDir is where a Session's home is kept (sessions/NAME/home) and
	// the shared caches (caches/uid-UID/NAME); empty refuses both. Like
	// BwrapCache it is opened without following links, and a writable
	// directory that is, holds or lies in it is refused.
	DataDir string
	// Stdin, Stdout and Stderr are handed to the command as they are (no
	// copying). Nil means /dev/null.
	Stdin, Stdout, Stderr *os.File
	// Terminal, when set, is the caller's terminal (usually Stdin): the
	// command then gets a new pseudo-terminal inside the sandbox as its
	// controlling terminal and as its 0, 1 and 2, so a shell has job
	// control and Ctrl-C and Ctrl-Z reach its foreground job. Stdin's bytes
	// are relayed to it and its output to Stdout; Terminal is in raw mode
	// for the run (restored after) and its window size is followed on
	// SIGWINCH. TERM is passed from LookupEnv unless the policy sets it.
	// bwrap and Landlock do this; tier 0 (ModeOff) leaves the command on
	// the caller's own terminal, and the other mechanisms refuse it.
	Terminal *os.File
	// Signals, when set, are relayed to the command until Run returns.
	Signals <-chan os.Signal
	// LookupEnv resolves the policy's PassEnv names; nil passes none.
	LookupEnv func(string) (string, bool)
	// DryRun, when set, receives the bwrap command line and its argument
	// stream (variable values redacted) and nothing runs.
	DryRun io.Writer
	// Audit, when set, receives the built-in egress proxy's decisions and
	// the run's start and end, as JSON lines.
	Audit io.Writer
	// Logger receives debug events; nil discards them.
	Logger *slog.Logger
	// Refusals, when set, is told of everything the run refused the
	// command (connections, sockets, ports, agent requests), each with
	// the flag that would allow it; the report lists them (Refused).
	Refusals *refusals.Collector
	// ProcSys is where kernel settings are read; empty means /proc/sys.
	ProcSys string
	// Init is a dedicated init binary that bwrap starts inside the sandbox
	// in place of this one, on runs that need an init; see InitBinary.
	Init InitBinary
	// MapOwner (--map-owner) lends the workdir's owner to the sandbox's
	// uid when sandbox-run is root: the workdir is bound through an
	// idmapped mount that shows the owner's files as the sandbox uid's and
	// stores the command's writes as the owner's. The command still runs
	// as the unprivileged uid, never host uid 0; set-ID bits are refused
	// (filter.Options.NoSetID). bwrap on Linux only; refused otherwise.
	MapOwner bool
	// Image, when its Ref is set, runs the command in that container
	// image's file system under gVisor (see ImageSource).
	Image ImageSource
	// Resolver is the memo of the plan's path walks (see
	// pathguard.Resolver): the caller may pass the one it checked the
	// policy's paths with (devenv.Gather), so that the plan walks each
	// host directory once. nil: Run makes a new one.
	Resolver *pathguard.Resolver
	// protect tunes the protection of the writable directories for
	// in-package tests (zero: as every run has it). Only Linux's
	// mechanisms protect paths this way.
	protect protect.Hooks //lint:ignore U1000 read by the Linux mechanisms only
}

// InitBinary names sandbox-run-init (cmd/sandbox-run-init), which serves
// init's hidden modes (initproc.Modes) and links nothing else, so it
// starts about 1 ms sooner than this binary re-executed. bwrap runs it
// when the run needs an init: forwarding (--allow-host, --llm-socket), a
// terminal, or an rlimit the sandbox's /bin/sh cannot set.
//
// It is used only when the file at Path carries the Go build ID BuildID
// (the one make build stamps into sandbox-run, so a binary from another
// build is never init), is not reached through a writable directory of
// the run (checked as any read-only bind is: the command could replace it
// for the next run), is a regular file and is executable by the sandbox's
// uid. In every other case, the zero value included, this binary is init,
// as it always was: the same protections, only slower. Which one bwrap ran
// is logged at debug level. Other mechanisms ignore it.
type InitBinary struct {
	Path    string
	BuildID string
	// Beside, when Path is empty, names the file in this executable's
	// directory that Path is; it is looked up only when a run needs an
	// init, so a run that needs none reads nothing for it.
	Beside string
}

// caller is what of o every mechanism takes as it is.
func (o Options) caller() mechanism.Caller {
	return mechanism.Caller{RunID: mechanism.NewRunID(), Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Signals: o.Signals,
		LookupEnv: o.LookupEnv, Audit: o.Audit, Logger: o.logger()}
}

// config is o as the mechanisms read it, for a run of p: the image, when
// o names one, is resolved by the mechanism's Prepare through it.
func (o Options) config(p policy.Policy) mechanism.Config {
	c := mechanism.Config{Caller: o.caller(), BwrapPath: o.BwrapPath, RunscPath: o.RunscPath,
		BwrapCache: o.BwrapCache, DataDir: o.DataDir, Terminal: o.Terminal, DryRun: o.DryRun,
		Refusals: o.Refusals, ProcSys: o.ProcSys, Init: mechanism.InitBinary(o.Init), MapOwner: o.MapOwner,
		Resolver: o.Resolver, Protect: o.protect}
	if o.Image.Ref != "" {
		c.Image = func(ctx context.Context) (*ociimage.Image, error) { return resolveImage(ctx, p, o) }
	}
	return c
}

func (o Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Run runs cmd under p and returns when the command and everything it
// started have ended.
//
// An error means the command never ran: one wrapping policy.ErrInvalid,
// ErrUnsupported or ErrSetup when the policy cannot be enforced as asked;
// an *ExecError when the sandbox was set up but cmd could not be started
// (with a Result holding the report and 126 or 127); a *TimeoutError when
// the policy's Timeout passed during set-up. When the command ran, the
// error is nil and Result.Report.Exit says how it ended, by class: its own
// status, a signal, the policy's Timeout (ExitTimeout, 124), a limit, ctx
// cancelled (the whole sandbox is killed), or the mechanism killed from
// outside; Exit.Reason says why in one line when sandbox-run ended it.
//
// Run enforces p.Timeout itself, for every mechanism.
func Run(ctx context.Context, p policy.Policy, cmd []string, opts Options) (*Result, error) {
	if len(cmd) == 0 {
		return nil, &policy.InvalidError{Field: "command", Reason: "empty", Fix: "name a command after --"}
	}
	for _, a := range cmd {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, &policy.InvalidError{Field: "command", Reason: "an argument holds a NUL byte", Fix: "remove the NUL byte"}
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.WithDefaults()
	if opts.Resolver == nil {
		opts.Resolver = pathguard.NewResolver()
	}
	if err := checkHost(p, opts); err != nil {
		return nil, err
	}
	if opts.Terminal != nil && runtime.GOOS != "linux" && p.Sandbox != policy.ModeOff {
		return nil, fault.New("--tty", "only bwrap on Linux gives the command a terminal of its own so far", "pass --no-tty")
	}
	if (p.Session != "" || len(p.Caches) > 0) && runtime.GOOS != "linux" {
		return nil, fault.New("--session and --cache", "only bwrap on Linux keeps sessions and shared caches so far",
			"leave them out (pass --home DIR for a home of your own), or run with bwrap")
	}
	res, err := outcome(runTimed(ctx, p, cmd, opts))
	if res != nil {
		res.Report.Developer = developerReport(p)
	}
	var ee *ExecError
	if errors.As(err, &ee) {
		shown := shownInside(p)
		if p.Sandbox == policy.ModeOff {
			shown = func(string) bool { return true }
		}
		explainNotFound(ee, p, opts.LookupEnv, shown)
	}
	return res, err
}

// runTimed runs the policy's mechanism under the policy's timeout.
func runTimed(ctx context.Context, p policy.Policy, cmd []string, opts Options) (*Result, error) {
	run := runMechanism
	if p.Timeout <= 0 || opts.DryRun != nil {
		return run(ctx, p, cmd, opts)
	}
	// The timer's own cause tells its firing apart from a deadline of the
	// caller's ctx, which stays the caller's error.
	d := time.Duration(p.Timeout)
	tctx, cancel := context.WithTimeoutCause(ctx, d, errTimerFired)
	defer cancel()
	res, err := run(tctx, p, cmd, opts)
	return timedOut(tctx, d, res, err)
}

// errTimerFired is the cause of Run's timer context.
var errTimerFired = errors.New("the policy's timeout passed")

// timedOut turns a run that ended because Run's timer fired into a
// *TimeoutError with exit status 124. A mechanism returns ctx's error only
// when it acted on ctx (ended the sandbox or gave up setting it up), so a
// command that ended on its own just before the timer keeps its status.
func timedOut(tctx context.Context, d time.Duration, res *Result, err error) (*Result, error) {
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(context.Cause(tctx), errTimerFired) {
		return res, err
	}
	if res == nil {
		return nil, &TimeoutError{Timeout: d}
	}
	res.ExitCode = ExitTimeout
	te := &TimeoutError{Timeout: d, Started: true}
	res.Report.Exit = &report.Exit{Code: ExitTimeout, Class: report.ClassTimedOut, Reason: te.Error()}
	return res, te
}

// outcome turns what a mechanism returned into Run's contract: a command
// that ran is a Result and no error, however it ended; the mechanisms'
// own errors for such an end (a limit, the timer, ctx, the mechanism
// killed) become the Exit's class and reason.
func outcome(res *Result, err error) (*Result, error) {
	if res == nil || err == nil {
		return res, err
	}
	var ee *ExecError
	if errors.As(err, &ee) {
		return res, err
	}
	exit := res.Report.Exit
	if exit == nil {
		exit = report.Classify(res.ExitCode, "")
		res.Report.Exit = exit
	}
	var te *TimeoutError
	var le *mechanism.LimitError
	var ke *mechanism.KilledError
	switch {
	case errors.As(err, &le):
		exit.Reason, exit.Usage, exit.Limit = err.Error(), le.Exceeded.Usage, le.Exceeded.Limit
	case errors.As(err, &te), errors.As(err, &ke):
		exit.Reason = err.Error()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		exit.Class, exit.Reason = report.ClassCancelled, "cancelled ("+err.Error()+"); the whole sandbox was ended"
	default:
		return res, err
	}
	return res, nil
}

// Reexec serves the hidden modes in which a run re-executes the running
// binary: sandbox-run's init inside the sandbox, the exec shim that
// applies rlimits and the landlock shim. Run starts /proc/self/exe in
// those modes, so a program that calls Run must call Reexec first thing in
// main with os.Args[1:] and exit with code when handled is true.
// (sandbox-run itself dispatches them, and its own, through
// internal/reexec, which consults HiddenModes.)
func Reexec(args []string) (code int, handled bool) {
	if len(args) == 0 {
		return 0, false
	}
	if m, ok := HiddenModes()[args[0]]; ok {
		return m(args[1:]), true
	}
	return 0, false
}

// HiddenModes returns the modes Reexec serves, by the name Run passes as
// the first argument, each with the function that serves it (given the
// arguments after the name; it returns the exit status).
func HiddenModes() map[string]func(args []string) int {
	m := initproc.Modes()
	m[landlock.Arg] = func([]string) int { return landlock.Main() }
	return m
}

// hostOf returns the caller's own directories that no writable directory
// may expose: the home directory as $HOME names it and as the passwd entry
// of the effective uid does (a hostile $HOME is the caller's own doing, but
// the cache directory is derived from it, so both count), and
// sandbox-run's cache, each as given and resolved; and which directories
// in /tmp are the caller's own (hostOwn: the sandbox's uid p.UID counts
// when sandbox-run is root).
func hostOf(p policy.Policy, opts Options) policy.Host {
	var h policy.Host
	spellings := func(p string) []string {
		if p == "" || !filepath.IsAbs(p) {
			return nil
		}
		p = filepath.Clean(p)
		out := []string{p}
		if r, ok := plan.ResolvedPath(opts.Resolver, p); ok && r != p {
			out = append(out, r)
		}
		return out
	}
	h.Home = spellings(os.Getenv("HOME"))
	if u, err := user.LookupId(strconv.Itoa(os.Geteuid())); err == nil {
		h.Home = append(h.Home, spellings(u.HomeDir)...)
	}
	h.State = append(spellings(opts.BwrapCache), spellings(opts.DataDir)...)
	h.Own = plan.HostOwn(opts.Resolver, p.UID)
	return h
}

// checkHost refuses a writable directory of p that exposes the system or
// the caller's own state (policy.Host.CheckWritable), at either spelling:
// as given and resolved.
func checkHost(p policy.Policy, opts Options) error {
	h := hostOf(p, opts)
	for _, w := range p.Writable() {
		if err := h.CheckWritable(w, w); err != nil {
			return err
		}
		if r, ok := plan.ResolvedPath(opts.Resolver, w); ok && r != w {
			if err := h.CheckWritable(w, r); err != nil {
				return err
			}
		}
	}
	return nil
}
