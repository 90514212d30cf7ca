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
		e := Supervise(context.Background(), p, nil, nil)
		if e.Exceeded != nil || e.Cancelled || e.Err(context.Background()) != nil || ExitStatus(c.ProcessState) != 3 {
			t.Fatalf("ending %+v, status %d; want none, 3", e, ExitStatus(c.ProcessState))
		}
	})
	t.Run("limit", func(t *testing.T) {
		c, p := start(t, "sleep", "60")
		over := make(chan limits.Exceeded, 1)
		over <- limits.Exceeded{Kind: limits.MemoryLimit, Usage: 2, Limit: 1}
		e := Supervise(context.Background(), p, nil, over)
		var le *LimitError
		if e.Exceeded == nil || e.Class() != "memory_limit" || !errors.As(e.Err(context.Background()), &le) || ExitStatus(c.ProcessState) != 128+9 {
			t.Fatalf("ending %+v, status %d; want memory_limit, 137", e, ExitStatus(c.ProcessState))
		}
	})
	t.Run("ctx", func(t *testing.T) {
		c, p := start(t, "sleep", "60")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		e := Supervise(ctx, p, nil, nil)
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
		e := Supervise(ctx, p, sig, nil)
		if e.Cancelled || ExitStatus(c.ProcessState) != 128+int(syscall.SIGTERM) {
			t.Fatalf("ending %+v, status %d; want SIGTERM's 143", e, ExitStatus(c.ProcessState))
		}
	})
}
