package off

import (
	"context"
	"io"
	"os"
	"os/exec"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/report"

	"github.com/sandbox-run/sandbox-run/policy"
)

// New returns tier 0 for cmd under p: no sandbox at all, which the report
// says in its Notes and in every protection it lists as not configured.
func New(p policy.Policy, cmd []string, c mechanism.Config) (mechanism.Mechanism, error) {
	return &tier0{p: p, cmd: cmd, caller: c.Caller}, nil
}

// tier0 is tier 0: a plain process with the policy's environment and
// nothing else of the caller's, in the workdir. It confines nothing else
// and its report says so.
type tier0 struct {
	p      policy.Policy
	cmd    []string
	caller mechanism.Caller
	env    []string
	lim    limits.Plan
	rep    report.Report
	c      *exec.Cmd // the started command
}

func (r *tier0) Close(*mechanism.Result) {}

// describe prints nothing: tier 0 runs the command as it is.
func (r *tier0) Describe(io.Writer) {}

// Probe checks nothing: tier 0 runs anywhere. It takes no plan, and
// holds the default ceilings only where the sampler runs.
func (r *tier0) Probe(context.Context) (mechanism.Host, error) {
	return mechanism.Host{UID: os.Getuid(), GID: os.Getgid(), Root: os.Geteuid() == 0, Ceilings: mechanism.SamplerAvailable}, nil
}

// Prepare asks for nothing: the command has the host's network and the
// caller's streams as they are.
func (r *tier0) Prepare(_ context.Context, pd mechanism.Planned) error {
	return r.setUp(pd)
}

// Attach returns the report; there is nothing to attach.
func (r *tier0) Attach(context.Context, mechanism.Setup) (*report.Report, error) {
	return &r.rep, nil
}

// setUp builds the command's environment, its limits and the report.
func (r *tier0) setUp(pd mechanism.Planned) error {
	p := r.p
	env, err := p.Environ(r.caller.LookupEnv)
	if err != nil {
		return err
	}
	r.env = env
	rep := report.Report{Tier: 0, Mechanism: "none", HostUID: os.Getuid(), HostGID: os.Getgid(),
		Writable: p.Writable(), Network: "host", EnvNames: mechanism.EnvNames(env),
		Notes: []string{"tier 0: no sandbox; the command has the caller's files, network and rights"}}
	rep.Protections = []report.Protection{
		{Name: "environment_cleared", Configured: true},
		{Name: "own_session", Configured: true, Detail: "its process group is killed when it ends; a setsid child escapes that"},
	}
	for _, n := range []string{"namespace:user", "namespace:mount", "namespace:pid", "namespace:net", "seccomp", "capabilities_dropped", "protected_paths"} {
		rep.Protections = append(rep.Protections, report.Protection{Name: n, Configured: false})
	}
	// No user namespace: RLIMIT_NPROC would count every process of the
	// caller's uid on the host, so pids are sampled (Env{} says so).
	// The default ceilings (memory, pids) are sampled, so only where the
	// sampler runs; elsewhere the report lists none.
	if r.lim, err = limits.NewPlan(pd.Limits, limits.Env{DefaultMemory: pd.DefaultMemory}); err != nil {
		return &fault.Error{What: "limits", Why: err.Error(), Fix: "pass positive limits"}
	}
	if r.lim.Sample != (limits.Limits{}) && !mechanism.SamplerAvailable {
		return fault.New("--memory, --pids and --cpu-time cannot be held in tier 0 here",
			"they are sampled from /proc, which exists only on Linux", "drop them, or run on Linux")
	}
	// No user namespace of its own: the user's inotify allowance is
	// the host's, and no ceiling of the run's can be set.
	rep.Limits = append(append(mechanism.TimeoutLimit(p), mechanism.LimitReport(r.lim, p)...), mechanism.InotifyLimits(limits.Inotify{})...)
	if n := mechanism.SampledMemoryNote(r.lim, false); n != "" {
		rep.Notes = append(rep.Notes, n)
	}
	r.rep = rep
	return nil
}

// command is the process to start: the command itself, or the exec shim
// that applies the rlimits to itself and becomes the command, so that
// sandbox-run keeps its own.
func (r *tier0) command(path string) (*exec.Cmd, error) {
	cmd := r.cmd
	c := exec.Command(path, cmd[1:]...)
	c.Args[0] = cmd[0]
	if len(r.lim.Rlimits) > 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, fault.New("cannot find sandbox-run's own binary", err.Error(), "run sandbox-run from a readable file")
		}
		c = exec.Command(self, initproc.ExecArgs(r.lim.Rlimits, path, cmd)...)
		c.Args[0] = "sandbox-run"
	}
	c.Env = r.env
	c.Dir = r.p.Workdir
	c.Stdin, c.Stdout, c.Stderr = r.caller.Stdin, r.caller.Stdout, r.caller.Stderr
	c.SysProcAttr = mechanism.GroupAttr()
	return c, nil
}

// Start starts the command in a process group of its own, with the
// sampled limits held from its start.
func (r *tier0) Start(ctx context.Context) (mechanism.Process, error) {
	path, err := mechanism.LookPath(r.cmd[0], r.env)
	if err != nil {
		return mechanism.Process{}, mechanism.LookupErr(r.cmd[0], err)
	}
	c, err := r.command(path)
	if err != nil {
		return mechanism.Process{}, err
	}
	if err := c.Start(); err != nil {
		return mechanism.Process{}, &mechanism.ExecError{Code: exitcode.NotExecutable, Command: r.cmd[0], Reason: err.Error()}
	}
	// The shim raises its own too, before it becomes the command; this
	// reads it back (and raises it, should the shim not have got there).
	r.rep.OOMScoreAdj = mechanism.RaiseOOM(c.Process.Pid)
	over, err := mechanism.Sample(ctx, c.Process.Pid, r.lim.Sample)
	if err != nil {
		// Fail closed: the report would claim a limit nobody holds.
		mechanism.KillGroup(c.Process)
		c.Wait()
		return mechanism.Process{}, fault.New("cannot watch the command's sampled limits", err.Error(),
			"check that /proc is mounted and readable, or drop --memory, --pids and --cpu-time")
	}
	r.c = c
	return mechanism.Process{Wait: c.Wait,
		Signal: func(s os.Signal) { mechanism.SignalGroup(c.Process, s) },
		Kill:   func() { mechanism.KillGroup(c.Process) },
		Over:   over,
	}, nil
}

// Finish ends what the command left in its group.
func (r *tier0) Finish(context.Context, mechanism.Ending) (mechanism.Ended, error) {
	mechanism.KillGroup(r.c.Process)
	return mechanism.Ended{Code: mechanism.ExitStatus(r.c.ProcessState), Report: r.rep}, nil
}
