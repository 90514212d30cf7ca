package mechanism

import (
	"context"
	"os"

	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/report"
)

// Process is a started command as Supervise holds it: how to wait for it,
// how to relay a signal to it, and how to end it with everything it
// started that the mechanism can reach.
type Process struct {
	// Wait returns once the command has ended (exec.Cmd.Wait).
	Wait func() error
	// Signal relays one of the caller's signals (to the command's process
	// group, or to what the mechanism names).
	Signal func(os.Signal)
	// Kill ends the command and what it started; Supervise calls it on a
	// limit or ctx, while the command has not been waited for.
	Kill func()
}

// Ending says why Supervise ended the command: a sampled limit (Exceeded
// non-nil) or ctx (Cancelled); neither when it ended on its own.
type Ending struct {
	Exceeded  *limits.Exceeded
	Cancelled bool
}

// Err is the run's error for e: a *LimitError, ctx's error, or nil.
func (e Ending) Err(ctx context.Context) error {
	switch {
	case e.Exceeded != nil:
		return &LimitError{Exceeded: *e.Exceeded}
	case e.Cancelled:
		return CtxErr(ctx)
	}
	return nil
}

// Class is the exit class of a run that e ended ("" when the command
// ended on its own).
func (e Ending) Class() report.ExitClass {
	if e.Exceeded != nil {
		return LimitClass(e.Exceeded.Kind)
	}
	return ""
}

// Supervise is the one supervision loop of the mechanisms that run the
// command as a child of sandbox-run (tier 0, landlock, seatbelt): until
// the command ends it relays signals, and ends the command when a sampled
// limit is crossed (over; nil: none is sampled) or ctx is done. It
// returns once the command has ended and the loop has stopped: no signal
// is relayed and Kill is not called after that, so the caller ends what
// the command left behind by the means it has (a process group, a
// subreaper's children) without a race with the loop.
func Supervise(ctx context.Context, p Process, signals <-chan os.Signal, over <-chan limits.Exceeded) Ending {
	done := make(chan struct{})
	ended := make(chan Ending, 1)
	go func() {
		var e Ending
		defer func() { ended <- e }()
		for {
			select {
			case s := <-signals:
				p.Signal(s)
			case x, ok := <-over:
				over = nil
				if ok {
					e.Exceeded = &x
					p.Kill()
					return
				}
			case <-ctx.Done():
				e.Cancelled = true
				p.Kill()
				return
			case <-done:
				return
			}
		}
	}()
	p.Wait()
	close(done)
	return <-ended
}
