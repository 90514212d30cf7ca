package sandbox

import (
	"context"

	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/limits"

	"github.com/sandbox-run/sandbox-run/policy"
)

// runOff runs tier 0: a plain process with the policy's environment and
// nothing else of the caller's, in the workdir. It confines nothing else and
// its report says so.
func runOff(ctx context.Context, p policy.Policy, cmd []string, opts Options) (*Result, error) {
	env, err := p.Environ(opts.LookupEnv)
	if err != nil {
		return nil, err
	}
	report := Report{Tier: 0, Mechanism: "none", Platform: platform(), HostUID: os.Getuid(), HostGID: os.Getgid(),
		Writable: p.Writable(), Network: "host",
		Notes: []string{"tier 0: no sandbox; the command has the caller's files, network and rights"}}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		report.EnvNames = append(report.EnvNames, k)
	}
	sort.Strings(report.EnvNames)
	report.RunID = newRunID()
	report.Protections = []Protection{
		{Name: "environment_cleared", Configured: true},
		{Name: "own_session", Configured: true, Detail: "its process group is killed when it ends; a setsid child escapes that"},
	}
	for _, n := range []string{"namespace:user", "namespace:mount", "namespace:pid", "namespace:net", "seccomp", "capabilities_dropped", "protected_paths"} {
		report.Protections = append(report.Protections, Protection{Name: n, Configured: false})
	}
	report.TimeoutSec = time.Duration(p.Timeout).Seconds()
	report.EnvironmentDigest = environmentDigest(&report)
	if opts.DryRun != nil {
		return &Result{Report: report}, nil
	}
	path, err := lookPathIn(cmd[0], env)
	if err != nil {
		code := 127
		if errors.Is(err, os.ErrPermission) {
			code = 126
		}
		return &Result{ExitCode: code, Report: report}, &ExecError{Code: code, Command: cmd[0], Reason: "command not found"}
	}
	// No user namespace: RLIMIT_NPROC would count every process of the
	// caller's uid on the host, so pids are sampled (Env{} says so).
	l := limits.Limits{Memory: p.Memory, Pids: p.Pids, NoFile: p.NoFile, FSize: p.FSize, CPUTime: time.Duration(p.CPUTime)}
	if samplerAvailable {
		l.Pids = pidsCeiling(p)
	}
	lim, err := limits.NewPlan(l, limits.Env{})
	if err != nil {
		return nil, &SetupError{What: "limits", Why: err.Error(), Fix: "pass positive limits"}
	}
	if lim.Sample != (limits.Limits{}) && !samplerAvailable {
		return nil, setupErr("--memory, --pids and --cpu-time cannot be held in tier 0 here",
			"they are sampled from /proc, which exists only on Linux", "drop them, or run on Linux")
	}
	report.Limits = append(timeoutLimit(p), limitReport(lim)...)
	report.EnvironmentDigest = environmentDigest(&report)
	c := exec.Command(path, cmd[1:]...)
	c.Args[0] = cmd[0]
	if len(lim.Rlimits) > 0 {
		// The exec shim applies the rlimits to itself and becomes the
		// command, so sandbox-run keeps its own.
		self, err := os.Executable()
		if err != nil {
			return nil, setupErr("cannot find sandbox-run's own binary", err.Error(), "run sandbox-run from a readable file")
		}
		c = exec.Command(self, append([]string{initproc.ExecArg, limits.EncodeRlimits(lim.Rlimits), path}, cmd...)...)
		c.Args[0] = "sandbox-run"
	}
	c.Env = env
	c.Dir = p.Workdir
	c.Stdin, c.Stdout, c.Stderr = opts.Stdin, opts.Stdout, opts.Stderr
	c.SysProcAttr = offSysProcAttr()
	if err := c.Start(); err != nil {
		return &Result{ExitCode: 126, Report: report}, &ExecError{Code: 126, Command: cmd[0], Reason: err.Error()}
	}
	over, err := sampleOff(ctx, c.Process.Pid, lim.Sample)
	if err != nil {
		// Fail closed: the report would claim a limit nobody holds.
		killGroup(c.Process)
		c.Wait()
		return nil, setupErr("cannot watch the command's sampled limits", err.Error(),
			"check that /proc is mounted and readable, or drop --memory, --pids and --cpu-time")
	}
	done := make(chan struct{})
	killed := make(chan limits.Exceeded, 1)
	cancelled := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case s := <-opts.Signals:
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
	killGroup(c.Process) // what the command left in its group
	code := exitCode(c.ProcessState)
	report.Exit = classify(code, "")
	select {
	case e := <-killed:
		report.Exit = classify(code, limitClass(e.Kind))
		return &Result{ExitCode: code, Report: report}, &LimitError{Exceeded: e}
	case <-cancelled:
		// Ended because ctx was done; Run classifies its own timer.
		return &Result{ExitCode: code, Report: report}, ctxErr(ctx)
	default:
	}
	return &Result{ExitCode: code, Report: report}, nil
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
		return 125
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}
