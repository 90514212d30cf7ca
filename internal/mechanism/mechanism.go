package mechanism

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostnet"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// LookPath finds name as the command will: on the PATH of env (the
// command's environment, not the caller's), or as given when it has a
// slash. Only a regular executable file is found; exec.ErrNotFound otherwise.
func LookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range strings.Split(v, ":") {
				if dir == "" {
					continue
				}
				if p, err := exec.LookPath(dir + "/" + name); err == nil {
					return p, nil
				}
			}
		}
	}
	return "", exec.ErrNotFound
}

// CtxErr is ctx's error, named as sandbox-run's, or nil while ctx is live.
func CtxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}

// ExitStatus is the CLI contract's status of an ended process: its own
// exit code, 128+N for signal N, exitcode.Setup when it never ran (nil).
func ExitStatus(st *os.ProcessState) int {
	if st == nil {
		return exitcode.Setup
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitcode.OfSignal(int(ws.Signal()))
	}
	return st.ExitCode()
}

// LimitReport lists each limit of the plan, how it is enforced and, from
// p, whether it is a default or the policy's. A memory ceiling turned off
// (policy.NoMemoryLimit) is listed as "none".
func LimitReport(pl limits.Plan, p policy.Policy) []report.Limit {
	var out []report.Limit
	add := func(name string, v int64, how limits.Method, format func(int64) string, source string) {
		if v > 0 {
			out = append(out, report.Limit{Name: name, Value: format(v), Enforced: string(how), Source: source})
		}
	}
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	add("memory", pl.Limits.Memory, pl.How.Memory, n, report.SourceOf(p.Memory))
	if p.Memory == policy.NoMemoryLimit {
		out = append(out, report.Limit{Name: "memory", Value: "none", Enforced: string(limits.NotLimited), Source: report.SourcePolicy})
	}
	add("pids", pl.Limits.Pids, pl.How.Pids, n, report.SourceOf(p.Pids))
	add("cpu_time", int64(pl.Limits.CPUTime), pl.How.CPUTime, func(v int64) string { return time.Duration(v).String() }, report.SourcePolicy)
	add("nofile", pl.Limits.NoFile, pl.How.NoFile, n, report.SourcePolicy)
	add("fsize", pl.Limits.FSize, pl.How.FSize, n, report.SourcePolicy)
	out = append(out, report.Limit{Name: "core", Value: "0", Enforced: string(pl.How.Core)})
	return out
}

// SampledMemoryNote says what a sampled memory ceiling counts of the
// memory no process maps, "" when memory is not sampled. privateTmpfs
// says whether the sandbox's /tmp and /dev/shm are its own tmpfs
// (bwrap), whose use is counted; elsewhere they are the host's.
func SampledMemoryNote(pl limits.Plan, privateTmpfs bool) string {
	if pl.How.Memory != limits.BySampler {
		return ""
	}
	n := "sampled memory counts resident memory plus every memfd and /dev/shm object a process holds open"
	if privateTmpfs {
		n += " and what the sandbox's /tmp and /dev/shm hold"
	} else {
		n += "; not files in /tmp or /dev/shm that no process holds open (they are the host's)"
	}
	return n + "; not a shared memory object that is only mapped (its resident pages count), one in flight on a socket, nor System V segments no process maps"
}

// InotifyLimits is the report's lines for the inotify ceiling: held by
// the sandbox's user namespace ("userns"), or "none" where the mechanism
// has no user namespace of its own to hold it (c zero).
func InotifyLimits(c limits.Inotify) []report.Limit {
	if c == (limits.Inotify{}) {
		return []report.Limit{
			{Name: "inotify_instances", Value: "none", Enforced: "none"},
			{Name: "inotify_watches", Value: "none", Enforced: "none"},
		}
	}
	return []report.Limit{
		{Name: "inotify_instances", Value: strconv.FormatInt(c.Instances, 10), Enforced: "userns", Source: report.SourceDefault},
		{Name: "inotify_watches", Value: strconv.FormatInt(c.Watches, 10), Enforced: "userns", Source: report.SourceDefault},
	}
}

// LimitClass is the exit class of a run that limit k ended.
func LimitClass(k limits.Kind) report.ExitClass {
	switch k {
	case limits.MemoryLimit:
		return report.ClassMemoryLimit
	case limits.PidsLimit:
		return report.ClassPidsLimit
	case limits.CpuLimit:
		return report.ClassCPULimit
	case limits.TimedOut:
		return report.ClassTimedOut
	}
	return report.ExitClass(k.String())
}

// ExecError means the sandbox was set up but the command could not be
// started: Code is 127 (not found) or 126 (not executable).
type ExecError struct {
	Code    int
	Command string
	Reason  string
	// Fix, when set, says how to make the command runnable (for a command
	// the host has outside the sandbox's PATH or view).
	Fix string
}

func (e *ExecError) Error() string {
	if e.Fix != "" {
		return fmt.Sprintf("%s: %s; fix: %s", e.Command, e.Reason, e.Fix)
	}
	return fmt.Sprintf("%s: %s", e.Command, e.Reason)
}

// LimitError means a resource limit ended the whole sandbox (Run reports
// it by the limit's class).
type LimitError struct {
	Exceeded limits.Exceeded
}

func (e *LimitError) Error() string {
	k := e.Exceeded.Kind
	s := fmt.Sprintf("%s exceeded", k)
	switch {
	case k == limits.MemoryLimit && e.Exceeded.Limit > 0:
		s = fmt.Sprintf("memory limit exceeded (%d MiB in use, limit %d MiB)", e.Exceeded.Usage>>20, e.Exceeded.Limit>>20)
	case k == limits.PidsLimit && e.Exceeded.Limit > 0:
		s = fmt.Sprintf("task limit exceeded (%d tasks, limit %d)", e.Exceeded.Usage, e.Exceeded.Limit)
	case k == limits.CpuLimit:
		s = "CPU time limit exceeded"
	}
	return s + "; the whole sandbox was ended"
}

// Result is the outcome of a run whose sandbox was set up.
type Result struct {
	// ExitCode follows the CLI contract: the command's own status, 128+N
	// when it died of signal N, ExitTimeout (124) when the policy's Timeout
	// ended it.
	ExitCode int
	Report   report.Report
}

// Platform is sandbox-run's GOOS/GOARCH, as the report names it.
func Platform() string { return runtime.GOOS + "/" + runtime.GOARCH }

// PidsCeiling is the run's process ceiling: the policy's, or
// policy.DefaultPids.
func PidsCeiling(p policy.Policy) int64 {
	if p.Pids > 0 {
		return p.Pids
	}
	return policy.DefaultPids
}

// RunLimits is the run's limits as the policy sets them, with the two
// ceilings every Linux run has when the policy names none: the process
// ceiling (PidsCeiling) and the memory ceiling, limits.DefaultMemory
// (half the host's memory) unless the policy's Memory is
// policy.NoMemoryLimit. defaultMemory says the memory ceiling is that
// default. It fails when the host's memory cannot be read: a run never
// goes without the ceiling it would report.
func RunLimits(p policy.Policy) (l limits.Limits, defaultMemory bool, err error) {
	l = PolicyLimits(p)
	l.Pids = PidsCeiling(p)
	if p.Memory == 0 {
		if l.Memory, err = limits.DefaultMemory(); err != nil {
			return l, false, fault.New("cannot set the default memory ceiling", err.Error(), "pass --memory SIZE, or --memory none for no ceiling")
		}
		defaultMemory = true
	}
	return l, defaultMemory, nil
}

// PolicyLimits is the run's limits as the policy sets them, without the
// default ceilings (a memory ceiling turned off is none).
func PolicyLimits(p policy.Policy) limits.Limits {
	return limits.Limits{Memory: max(p.Memory, 0), Pids: p.Pids, NoFile: p.NoFile, FSize: p.FSize, CPUTime: time.Duration(p.CPUTime)}
}

// TimeoutLimit is the report's line for the policy's Timeout, which Run's
// timer enforces for every mechanism; nil when there is none.
func TimeoutLimit(p policy.Policy) []report.Limit {
	if p.Timeout <= 0 {
		return nil
	}
	return []report.Limit{{Name: "timeout", Value: time.Duration(p.Timeout).String(), Enforced: "timer"}}
}

// EnvNames is the report's list of an environment's names, sorted; the
// values are never reported.
func EnvNames(env []string) []string {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// NewRunID returns a random id that names one run in reports and audit
// lines.
func NewRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Mechanism is one way of running a command under a policy: bwrap,
// landlock, gvisor, seatbelt or none (tier 0). Package sandbox drives each
// one through the same steps, so that what a run checks, serves,
// supervises, classifies, reports and audits does not depend on which
// mechanism ran it: Probe, which says what it can enforce on this host
// (its Host); the plan the skeleton builds once as the Host asks (the
// state dirs, the path plan under the protection journal, the network,
// the limits);
// Prepare with it; what the Host reaches, which the skeleton sets up and
// takes down (the network, the terminal); Attach; Start; the one supervision
// loop (Supervise) over the Process Start returned; Finish, whose Ended
// the skeleton classifies; Close in every case, then the plan's release.
type Mechanism interface {
	// Probe checks the host and says what the mechanism can enforce on
	// it for this run: it finds its binaries, refuses what of the policy
	// it cannot hold, and picks who the sandbox runs as and how its plan
	// is laid out. An error means the command never runs.
	Probe(ctx context.Context) (Host, error)
	// Prepare sets up what comes before the network from what the
	// skeleton planned as Probe asked: the policy with its state dirs,
	// the plan, the network and the limits. The plan is the skeleton's:
	// the mechanism may add to it (Plan.Bind) but never closes it. An
	// error means the command never runs.
	Prepare(ctx context.Context, pl Planned) error
	// Attach sets up everything else short of starting the command with
	// what the skeleton set up as its Host asked: the network's sockets or
	// ports bound in, its variables and the terminal in the command's
	// environment. They are the skeleton's: the mechanism never closes
	// them. The report Attach returns claims only what is set up and is
	// final but for what the run itself reads back. An error means the
	// command never runs.
	Attach(ctx context.Context, s Setup) (*report.Report, error)
	// Describe writes what would run for --dry-run, values redacted.
	Describe(w io.Writer)
	// Start starts the command and returns what Supervise holds. An
	// *ExecError: the command was found not runnable before anything
	// started (the report is Prepare's); any other error is a set-up
	// failure, and nothing of the run is left running.
	Start(ctx context.Context) (Process, error)
	// Finish is called once, after Supervise returned end: it collects
	// what the sandbox left (read-backs, its status) and says how the
	// command ended. The skeleton stops the network after it. Its errors are those of a command that
	// never ran: an *ExecError (not found inside, with the report as far
	// as it was read back), a *KilledError (the mechanism itself was
	// killed, the command's status lost) or a set-up failure.
	Finish(ctx context.Context, end Ending) (Ended, error)
	// Close releases what Prepare and the run set up, in the reverse
	// order; res is the run's Result (nil when it did not run), for what
	// is settled only once the sandbox is gone (the quarantine of the
	// protected paths). It is called once, whatever happened before.
	Close(res *Result)
}

// New makes a mechanism for cmd under p, once per run; an error is a
// refusal (the mechanism cannot run here at all). Each mechanism's
// package has one, and a platform's table in package sandbox names them
// by the mode that asks for each: a new mechanism is a package and a
// line there, and no change to the skeleton.
type New func(p policy.Policy, cmd []string, cfg Config) (Mechanism, error)

// OwnerLender is a Mechanism that can lend the workdir's owner to the
// sandbox's uid (--map-owner); the skeleton refuses the flag for any
// other.
type OwnerLender interface {
	Mechanism
	LendsOwner()
}

// Host is what a mechanism found it can enforce on this host for a run,
// and what the skeleton is to plan for it.
type Host struct {
	// UID and GID are the host ids the sandbox's files are accessed as;
	// Root says sandbox-run runs as root.
	UID, GID int
	Root     bool
	// Layout, when set, asks for the run's plan (package plan), built
	// once by the skeleton: on Linux the mount plan, with the policy's
	// state dirs (sessions' homes, caches) and the protection journal;
	// elsewhere a plan by path (plan.ByPath: the zero Layout, Seatbelt's).
	// nil: the mechanism takes no plan (tier 0).
	Layout *plan.Layout
	// Ceilings says the mechanism holds the default memory and process
	// ceilings here (RunLimits): a run it cannot give them is refused
	// rather than run without them. Without it only the policy's own
	// limits are planned.
	Ceilings bool
	// Net is how the sandbox reaches the run's network; the skeleton
	// plans the network from it (Planned.Net) and starts it after
	// Prepare. The zero value: none (tier 0, whose command has the
	// host's).
	Net hostnet.Reach
	// Terminal says the command takes a terminal of its own, relayed to
	// the caller's (Config.Terminal). A mechanism that cannot give one
	// refuses in Probe instead; one that runs the command on the
	// caller's streams as they are (tier 0) asks for none.
	Terminal bool
}

// Planned is what the skeleton planned for a run, as the mechanism's
// Host asked.
type Planned struct {
	// Policy is the run's policy with its state dirs made (PrepareState
	// for a Layout; the caller's policy otherwise).
	Policy policy.Policy
	// Plan is the run's plan: on Linux the mount plan, elsewhere the plan
	// by path (its Paths); nil without a Layout.
	Plan *plan.Plan
	// Net is the run's network: the Host's Reach for the planned policy
	// and ids, with the plan's guard for what it hands in. The skeleton
	// starts it after Prepare and hands it to Attach (Setup.Net).
	Net hostnet.Request
	// Limits are the run's limits; DefaultMemory says the memory ceiling
	// is RunLimits' default, not the policy's.
	Limits        limits.Limits
	DefaultMemory bool
}

// Setup is what the skeleton set up for a run, as its Host asked.
type Setup struct {
	// Net is the run's network.
	Net hostnet.Net
	// TTY, when set, is the command's terminal: its stdin, stdout and
	// stderr, and its controlling terminal.
	TTY *os.File
	// Env are variables for the command's environment below the
	// policy's, which overrides them: the caller's TERM with a TTY.
	Env map[string]string
}

// Ended is a started command's end as its mechanism read it back.
type Ended struct {
	// Code is the command's status, as ExitStatus gives it.
	Code int
	// Report is the run's report, completed with what the run read back;
	// its Exit is the skeleton's to set.
	Report report.Report
	// Limit, when set, is a limit that ended the sandbox beside the loop:
	// one the kernel held (a cgroup's OOM kill) before a sample saw it.
	// It counts as Ending.Exceeded does.
	Limit *limits.Exceeded
}

// Caller is what the caller of a run hands every mechanism as it is: the
// command's standard streams (nil: /dev/null), the signals to relay to it
// until it ends (nil: none), how the policy's PassEnv names are resolved
// (nil: none is passed), where audit lines go (nil: nowhere) and the
// debug log (nil: discarded).
type Caller struct {
	// RunID names the run in the report and the audit; the skeleton picks
	// it (NewRunID) before Prepare, so that everything set up for the run
	// (its journal, the proxy's audit lines) is named alike.
	RunID                 string
	Stdin, Stdout, Stderr *os.File
	Signals               <-chan os.Signal
	LookupEnv             func(string) (string, bool)
	Audit                 io.Writer
	Logger                *slog.Logger
}

// Log is c.Logger, or a logger that discards when it is nil.
func (c Caller) Log() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// AuditStarter is a Mechanism with fields of its own for the run_start
// audit event (a profile's digest, a ruleset's ABI).
type AuditStarter interface {
	AuditStart() map[string]any
}

// LookupErr is the *ExecError of a LookPath error: 126 when a file was
// found that may not be run, 127 otherwise.
func LookupErr(name string, err error) *ExecError {
	if errors.Is(err, os.ErrPermission) {
		return &ExecError{Code: exitcode.NotExecutable, Command: name, Reason: "permission denied"}
	}
	return &ExecError{Code: exitcode.NotFound, Command: name, Reason: "command not found"}
}

// Parts returns r's report and exit status for those that amend both
// (protect.Pending.Finish); nil and nil for a nil r (the command never
// ran).
func (r *Result) Parts() (*report.Report, *int) {
	if r == nil {
		return nil, nil
	}
	return &r.Report, &r.ExitCode
}
