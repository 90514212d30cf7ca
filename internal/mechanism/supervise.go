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
	// Started, when set, says once whether the command has started (true)
	// or never will (false), for a mechanism whose sandbox starts it some
	// time after Wait's process (an init inside). Until it says true,
	// signals are held, then relayed in the order they came; after false
	// they are dropped. Nil: the command runs from the start.
	Started <-chan bool
	// OnStart, when set, is called on the loop once the command has
	// started (at once when Started is nil): it returns the sampled limits
	// to hold from then on (nil: none), or an error, on which the command
	// is ended at once, failing closed (Ending.StartErr).
	OnStart func() (<-chan limits.Exceeded, error)
	// Over, when set, says once that a sampled limit was crossed, from
	// the start (OnStart may add its own later); nil: none is sampled.
	Over <-chan limits.Exceeded
}

// Ending says why Supervise ended the command: a sampled limit (Exceeded
// non-nil), ctx (Cancelled) or OnStart's error (StartErr); none when it
// ended on its own.
type Ending struct {
	Exceeded  *limits.Exceeded
	Cancelled bool
	StartErr  error
}

// Err is the run's error for e: OnStart's, a *LimitError, ctx's error,
// or nil.
func (e Ending) Err(ctx context.Context) error {
	switch {
	case e.StartErr != nil:
		return e.StartErr
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

// Supervise is the one supervision loop of every mechanism: those that
// run the command as a child of sandbox-run (tier 0, landlock, seatbelt)
// and those whose sandbox starts it later (bwrap's and gVisor's init:
// Process.Started). Until the command ends it relays signals once the
// command has started, and ends the command when a sampled limit is
// crossed (Process.Over, or what OnStart returns) or ctx is
// done. It returns once the command has ended and the loop has stopped:
// no signal is relayed and Kill is not called after that, so the caller
// ends what the command left behind by the means it has (a process group,
// a subreaper's children) without a race with the loop.
func Supervise(ctx context.Context, p Process, signals <-chan os.Signal) Ending {
	done := make(chan struct{})
	ended := make(chan Ending, 1)
	go func() {
		l := loop{p: p, over: p.Over, started: p.Started}
		defer func() { ended <- l.e }()
		if l.started == nil && !l.start() {
			return
		}
		l.run(ctx, signals, done)
	}()
	p.Wait()
	close(done)
	return <-ended
}

// loop is Supervise's state, owned by its goroutine.
type loop struct {
	p       Process
	over    <-chan limits.Exceeded
	started <-chan bool // nil once it has said
	running bool        // the command has started: signals go through
	pending []os.Signal
	e       Ending
}

// start runs OnStart and relays the held signals; false when the command
// was ended because OnStart failed.
func (l *loop) start() bool {
	l.running = true
	if l.p.OnStart != nil {
		over, err := l.p.OnStart()
		if err != nil {
			l.e.StartErr = err
			l.p.Kill()
			return false
		}
		if over != nil {
			l.over = over
		}
	}
	for _, s := range l.pending {
		l.p.Signal(s)
	}
	l.pending = nil
	return true
}

func (l *loop) run(ctx context.Context, signals <-chan os.Signal, done <-chan struct{}) {
	for {
		select {
		case ok := <-l.started:
			l.started = nil
			if !ok {
				l.pending = nil
			} else if !l.start() {
				return
			}
		case s := <-signals:
			switch {
			case l.running:
				l.p.Signal(s)
			case l.started != nil:
				l.pending = append(l.pending, s)
			}
		case x, ok := <-l.over:
			l.over = nil
			if ok {
				l.e.Exceeded = &x
				l.p.Kill()
				return
			}
		case <-ctx.Done():
			l.e.Cancelled = true
			l.p.Kill()
			return
		case <-done:
			return
		}
	}
}
