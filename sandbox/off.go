package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/limits"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/policy"
)

// offRun is tier 0: a plain process with the policy's environment and
// nothing else of the caller's, in the workdir. It confines nothing else
// and its report says so.
type offRun struct {
	p      policy.Policy
	cmd    []string
	opts   Options
	env    []string
	lim    limits.Plan
	report Report
}

func (r *offRun) close(*Result) {}

// describe prints nothing: tier 0 runs the command as it is.
func (r *offRun) describe(io.Writer) {}

func (r *offRun) prepare(context.Context) (*Report, error) {
	p := r.p
	env, err := p.Environ(r.opts.LookupEnv)
	if err != nil {
		return nil, err
	}
	r.env = env
	rep := Report{Tier: 0, Mechanism: "none", Platform: platform(), HostUID: os.Getuid(), HostGID: os.Getgid(),
		Writable: p.Writable(), Network: "host", RunID: newRunID(),
		Notes: []string{"tier 0: no sandbox; the command has the caller's files, network and rights"}}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		rep.EnvNames = append(rep.EnvNames, k)
	}
	sort.Strings(rep.EnvNames)
	rep.Protections = []Protection{
		{Name: "environment_cleared", Configured: true},
		{Name: "own_session", Configured: true, Detail: "its process group is killed when it ends; a setsid child escapes that"},
	}
	for _, n := range []string{"namespace:user", "namespace:mount", "namespace:pid", "namespace:net", "seccomp", "capabilities_dropped", "protected_paths"} {
		rep.Protections = append(rep.Protections, Protection{Name: n, Configured: false})
	}
	rep.TimeoutSec = time.Duration(p.Timeout).Seconds()
	// No user namespace: RLIMIT_NPROC would count every process of the
	// caller's uid on the host, so pids are sampled (Env{} says so).
	// The default ceilings (memory, pids) are sampled, so only where the
	// sampler runs; elsewhere the report lists none.
	l := limits.Limits{Memory: max(p.Memory, 0), Pids: p.Pids, NoFile: p.NoFile, FSize: p.FSize, CPUTime: time.Duration(p.CPUTime)}
	defMem := false
	if samplerAvailable {
		if l, defMem, err = runLimits(p); err != nil {
			return nil, err
		}
	}
	if r.lim, err = limits.NewPlan(l, limits.Env{DefaultMemory: defMem}); err != nil {
		return nil, &SetupError{What: "limits", Why: err.Error(), Fix: "pass positive limits"}
	}
	if r.lim.Sample != (limits.Limits{}) && !samplerAvailable {
		return nil, fault.New("--memory, --pids and --cpu-time cannot be held in tier 0 here",
			"they are sampled from /proc, which exists only on Linux", "drop them, or run on Linux")
	}
	// No user namespace of its own: the user's inotify allowance is
	// the host's, and no ceiling of the run's can be set.
	rep.Limits = append(append(timeoutLimit(p), limitReport(r.lim, p)...), inotifyLimits(limits.Inotify{})...)
	if n := sampledMemoryNote(r.lim, false); n != "" {
		rep.Notes = append(rep.Notes, n)
	}
	rep.EnvironmentDigest = environmentDigest(&rep)
	r.report = rep
	return &r.report, nil
}

// command is the process to start: the command itself, or the exec shim
// that applies the rlimits to itself and becomes the command, so that
// sandbox-run keeps its own.
func (r *offRun) command(path string) (*exec.Cmd, error) {
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
	c.Stdin, c.Stdout, c.Stderr = r.opts.Stdin, r.opts.Stdout, r.opts.Stderr
	c.SysProcAttr = offSysProcAttr()
	return c, nil
}

func (r *offRun) run(ctx context.Context) (*Result, error) {
	rep := r.report
	path, err := lookPathIn(r.cmd[0], r.env)
	if err != nil {
		code := ExitNotFound
		if errors.Is(err, os.ErrPermission) {
			code = ExitNotExecutable
		}
		rep.Exit = &Exit{Code: code, Class: execClass(code)}
		return &Result{ExitCode: code, Report: rep}, &ExecError{Code: code, Command: r.cmd[0], Reason: "command not found"}
	}
	c, err := r.command(path)
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		rep.Exit = &Exit{Code: ExitNotExecutable, Class: ClassNotExecutable}
		return &Result{ExitCode: ExitNotExecutable, Report: rep}, &ExecError{Code: ExitNotExecutable, Command: r.cmd[0], Reason: err.Error()}
	}
	// The shim raises its own too, before it becomes the command; this
	// reads it back (and raises it, should the shim not have got there).
	rep.OOMScoreAdj = raiseOOM(c.Process.Pid)
	over, err := sampleOff(ctx, c.Process.Pid, r.lim.Sample)
	if err != nil {
		// Fail closed: the report would claim a limit nobody holds.
		killGroup(c.Process)
		c.Wait()
		return nil, fault.New("cannot watch the command's sampled limits", err.Error(),
			"check that /proc is mounted and readable, or drop --memory, --pids and --cpu-time")
	}
	killed, cancelled := r.supervise(ctx, c, over)
	code := exitCode(c.ProcessState)
	rep.Exit = classify(code, "")
	select {
	case e := <-killed:
		rep.Exit = classify(code, limitClass(e.Kind))
		return &Result{ExitCode: code, Report: rep}, &limitError{Exceeded: e}
	case <-cancelled:
		// Ended because ctx was done; Run classifies its own timer.
		return &Result{ExitCode: code, Report: rep}, ctxErr(ctx)
	default:
	}
	return &Result{ExitCode: code, Report: rep}, nil
}

// supervise relays signals to the command's group and ends the group on
// a limit or ctx, until the command has ended; then it ends what the
// command left in its group. It says which of the two ended it, if any.
func (r *offRun) supervise(ctx context.Context, c *exec.Cmd, over <-chan limits.Exceeded) (<-chan limits.Exceeded, <-chan struct{}) {
	done := make(chan struct{})
	killed := make(chan limits.Exceeded, 1)
	cancelled := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case s := <-r.opts.Signals:
				signalGroup(c.Process, s)
			case e, ok := <-over:
				over = nil
				if ok {
					killed <- e
					killGroup(c.Process)
					return
				}
			case <-ctx.Done():
				cancelled <- struct{}{}
				killGroup(c.Process)
				return
			case <-done:
				return
			}
		}
	}()
	c.Wait()
	close(done)
	killGroup(c.Process)
	return killed, cancelled
}

func lookPathIn(name string, env []string) (string, error) {
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

func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}

func exitCode(st *os.ProcessState) int {
	if st == nil {
		return ExitSetup
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitcode.OfSignal(int(ws.Signal()))
	}
	return st.ExitCode()
}
