//go:build unix

package mechanism

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/limits"
)

// TestSupervise drives the one supervision loop with real processes: each
// way a run ends says so, and the command is ended only by a limit, ctx or
// itself.
func TestSupervise(t *testing.T) {
	start := func(t *testing.T, args ...string) (*exec.Cmd, Process) {
		t.Helper()
		c := exec.Command(args[0], args[1:]...)
		c.SysProcAttr = GroupAttr()
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return c, Process{Wait: c.Wait,
			Signal: func(s os.Signal) { SignalGroup(c.Process, s) },
			Kill:   func() { KillGroup(c.Process) },
		}
	}
	t.Run("ends on its own", func(t *testing.T) {
		c, p := start(t, "sh", "-c", "exit 3")
		e := Supervise(context.Background(), p, nil)
		if e.Exceeded != nil || e.Cancelled || e.Err(context.Background()) != nil || ExitStatus(c.ProcessState) != 3 {
			t.Fatalf("ending %+v, status %d; want none, 3", e, ExitStatus(c.ProcessState))
		}
	})
	t.Run("limit", func(t *testing.T) {
		c, p := start(t, "sleep", "60")
		over := make(chan limits.Exceeded, 1)
		over <- limits.Exceeded{Kind: limits.MemoryLimit, Usage: 2, Limit: 1}
		p.Over = over
		e := Supervise(context.Background(), p, nil)
		var le *LimitError
		if e.Exceeded == nil || e.Class() != "memory_limit" || !errors.As(e.Err(context.Background()), &le) || ExitStatus(c.ProcessState) != 128+9 {
			t.Fatalf("ending %+v, status %d; want memory_limit, 137", e, ExitStatus(c.ProcessState))
		}
	})
	t.Run("ctx", func(t *testing.T) {
		c, p := start(t, "sleep", "60")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		e := Supervise(ctx, p, nil)
		if !e.Cancelled || e.Err(ctx) == nil || e.Class() != "" || ExitStatus(c.ProcessState) != 128+9 {
			t.Fatalf("ending %+v, status %d; want cancelled, 137", e, ExitStatus(c.ProcessState))
		}
	})
	t.Run("signal relayed", func(t *testing.T) {
		// Without the relay sleep would outlive the signal, and ctx's bound
		// would end it: Cancelled, 137.
		c, p := start(t, "sleep", "60")
		sig := make(chan os.Signal, 1)
		sig <- syscall.SIGTERM
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		e := Supervise(ctx, p, sig)
		if e.Cancelled || ExitStatus(c.ProcessState) != 128+int(syscall.SIGTERM) {
			t.Fatalf("ending %+v, status %d; want SIGTERM's 143", e, ExitStatus(c.ProcessState))
		}
	})
	t.Run("signals wait for the start", func(t *testing.T) {
		// The signal is in hand before the command starts; relayed at
		// once, it would end the shell before OnStart runs.
		dir := t.TempDir()
		c, p := start(t, "sh", "-c", `trap 'exit 5' TERM; : > `+dir+`/ready; while :; do sleep 0.05; done`)
		exited := make(chan struct{})
		wait := p.Wait
		p.Wait = func() error { defer close(exited); return wait() }
		started := make(chan bool, 1)
		go func() {
			for i := 0; i < 400; i++ { // the trap is set: 20 s at most
				if _, err := os.Stat(dir + "/ready"); err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond)
			started <- true
		}()
		p.Started = started
		heldUntilStart := false
		p.OnStart = func() (<-chan limits.Exceeded, error) {
			select {
			case <-exited:
			default:
				heldUntilStart = true
			}
			return nil, nil
		}
		sig := make(chan os.Signal, 1)
		sig <- syscall.SIGTERM
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e := Supervise(ctx, p, sig)
		if !heldUntilStart || e.Cancelled || ExitStatus(c.ProcessState) != 5 {
			t.Fatalf("held until the start %v, ending %+v, status %d; want held, then the trap's 5", heldUntilStart, e, ExitStatus(c.ProcessState))
		}
	})
	t.Run("never started drops signals", func(t *testing.T) {
		c, p := start(t, "sleep", "0.3")
		started := make(chan bool, 1)
		started <- false
		p.Started = started
		sig := make(chan os.Signal, 1)
		// Sent after Started said false, so that the loop has seen it
		// first or sees the signal with the gate shut for good.
		go func() { time.Sleep(50 * time.Millisecond); sig <- syscall.SIGTERM }()
		e := Supervise(context.Background(), p, sig)
		if e != (Ending{}) || ExitStatus(c.ProcessState) != 0 {
			t.Fatalf("ending %+v, status %d; want none, 0 (the signal dropped)", e, ExitStatus(c.ProcessState))
		}
	})
	t.Run("OnStart fails closed", func(t *testing.T) {
		c, p := start(t, "sleep", "60")
		bad := errors.New("no sampler")
		p.OnStart = func() (<-chan limits.Exceeded, error) { return nil, bad }
		e := Supervise(context.Background(), p, nil)
		if !errors.Is(e.Err(context.Background()), bad) || ExitStatus(c.ProcessState) != 128+9 {
			t.Fatalf("ending %+v, status %d; want OnStart's error, 137", e, ExitStatus(c.ProcessState))
		}
	})
	t.Run("OnStart's limits held", func(t *testing.T) {
		c, p := start(t, "sleep", "60")
		over := make(chan limits.Exceeded, 1)
		over <- limits.Exceeded{Kind: limits.PidsLimit}
		p.OnStart = func() (<-chan limits.Exceeded, error) { return over, nil }
		e := Supervise(context.Background(), p, nil)
		if e.Class() != "pids_limit" || ExitStatus(c.ProcessState) != 128+9 {
			t.Fatalf("ending %+v, status %d; want pids_limit, 137", e, ExitStatus(c.ProcessState))
		}
	})
}

// TestKillRefusesWideTargets: Kill never sends to 0 (this process's
// group), -1 (every process it may signal) or 1 (the host's init). Signal
// 0 sends nothing, so the check is safe: the raw kill(2) of each target
// succeeds (the control; a row whose control fails here, pid 1 as a user,
// is untested), Kill refuses it; a plain pid still goes through.
func TestKillRefusesWideTargets(t *testing.T) {
	for _, pid := range []int{0, -1, 1} {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Logf("pid %d: untested, the raw kill(2) fails here too: %v", pid, err)
			continue
		}
		if Kill(pid, 0) {
			t.Errorf("Kill(%d, 0) was sent; want it refused", pid)
		}
	}
	if !Kill(os.Getpid(), 0) {
		t.Error("Kill(own pid, 0) refused; want it sent")
	}
}
