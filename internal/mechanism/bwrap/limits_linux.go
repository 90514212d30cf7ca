package bwrap

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
)

// watchLimits starts whatever watches the run's limits beyond the kernel's
// own: the cgroup's counters (memory and pids events, CPU time from
// cpu.stat) and sampling of the sandbox's process tree for the limits the
// plan left to the sampler. Both can be needed at once: a cgroup without
// the memory controller still sums CPU time, while memory is sampled. It
// returns a nil channel when nothing needs watching, and an error when a
// sampler the plan relies on cannot start: the caller must then end the
// sandbox, since the report would claim a limit nobody holds.
func watchLimits(ctx context.Context, lim limits.Plan, cg *limits.Cgroup, initPID int) (<-chan limits.Exceeded, error) {
	var chans []<-chan limits.Exceeded
	if cg != nil {
		chans = append(chans, cg.Watch(ctx, 10*time.Millisecond))
	}
	if lim.Sample != (limits.Limits{}) {
		// The sandbox's own /tmp and /dev/shm are memory too.
		ch, err := limits.Sample(ctx, initPID, lim.Sample, limits.DefaultInterval, "/tmp", "/dev/shm")
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// The sandbox has already ended: nothing left to hold.
		case err != nil:
			return nil, err
		default:
			chans = append(chans, ch)
		}
	}
	switch len(chans) {
	case 0:
		return nil, nil
	case 1:
		return chans[0], nil
	}
	return firstExceeded(ctx, chans), nil
}

// firstExceeded forwards the first Exceeded any of chans sends and closes
// the result when that is sent, ctx is done, or every one has closed.
func firstExceeded(ctx context.Context, chans []<-chan limits.Exceeded) <-chan limits.Exceeded {
	out := make(chan limits.Exceeded, 1)
	got := make(chan limits.Exceeded, len(chans))
	var wg sync.WaitGroup
	for _, c := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e, ok := <-c; ok {
				got <- e
			}
		}()
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	go func() {
		defer close(out)
		select {
		case e := <-got:
			out <- e
		case <-all:
			select {
			case e := <-got:
				out <- e
			default:
			}
		case <-ctx.Done():
		}
	}()
	return out
}

// classifyLimit says whether a limit ended the run, from what the launcher
// did and what the kernel left behind.
func classifyLimit(lim limits.Plan, cg *limits.Cgroup, code int, killedBy limits.Kind) limits.Kind {
	ev := limits.Evidence{Killed: killedBy, CPULimit: lim.Limits.CPUTime}
	sig, signaled := exitcode.Signal(code)
	ev.Signal = sig
	if cg != nil {
		if e, err := cg.Events(); err == nil {
			ev.OOMKills = e.OOMKills + e.OOMGroupKills
			if killedBy == limits.None && e.Kind() != limits.None && signaled {
				ev.Killed = e.Kind()
			}
		}
		if t, err := cg.CPUTime(); err == nil {
			ev.CPUTime = t
		}
	}
	return limits.Classify(ev)
}

// OverheadTasks is added to the pids limit for the sandbox's tasks that are
// not the command's: bwrap's PID 1 and, on the init path, sandbox-run's
// init, a Go program with several threads. The command gets at least the
// limit it asked for, at most this many more.
const OverheadTasks = 8

// setupLimits plans how each limit is enforced: a cgroup of the run's own
// where a delegated cgroup v2 offers the controllers, else rlimits and
// sampling. A --cgroup-base that cannot be used is refused, not ignored.
// The process ceiling is policy.DefaultPids and the memory ceiling half
// the host's memory when the policy names none (runLimits).
//
// Pids without a cgroup's pids controller is RLIMIT_NPROC, set inside the
// sandbox's own user namespace: since Linux 5.14 the kernel counts it per
// user namespace and uid, so it holds the sandbox's tasks and nothing of
// the host's (the same uid's other processes, other sandboxes). On older
// kernels it is sampled. The command is never host root, whom the kernel
// would exempt.
func setupLimits(pd mechanism.Planned, runID string) (limits.Plan, *limits.Cgroup, error) {
	p, l, defMem := pd.Policy, pd.Limits, pd.DefaultMemory
	env := limits.Env{OverheadTasks: OverheadTasks, UserNS: limits.NProcPerUserNS(), DefaultMemory: defMem}
	// Every process of the sandbox inherits sandbox-run's own hard
	// RLIMIT_NPROC, and counts against it inside its user namespace: a
	// ceiling above it would be reported at a value that is not the one
	// held. The default comes down to it; one asked for is refused.
	if hard, err := limits.Hard(limits.NProc); err == nil && hard != limits.Infinity && uint64(l.Pids+OverheadTasks) > hard {
		if p.Pids > 0 || hard <= 2*OverheadTasks {
			return limits.Plan{}, nil, fault.New(fmt.Sprintf("--pids %d cannot be held", l.Pids),
				fmt.Sprintf("sandbox-run's own hard process limit is %d (with %d tasks of sandbox-run's own in the sandbox)", hard, OverheadTasks),
				fmt.Sprintf("pass --pids %d or less, or raise the hard limit (ulimit -Hu)", int64(hard)-OverheadTasks))
		}
		l.Pids = int64(hard) - OverheadTasks
	}
	var base string
	if l.Memory > 0 || l.Pids > 0 || l.CPUTime > 0 {
		b, err := limits.FindDelegated(p.CgroupBase)
		switch {
		case err == nil:
			mem, pids, err := limits.Enabled(b)
			if err == nil {
				base, env.Cgroup, env.CgroupMemory, env.CgroupPids = b, true, mem, pids
			}
		case p.CgroupBase != "":
			return limits.Plan{}, nil, &fault.Error{What: "--cgroup-base " + p.CgroupBase, Why: err.Error(),
				Fix: "pass a cgroup v2 directory you may write, with the memory and pids controllers enabled for its children, or drop --cgroup-base"}
		}
	}
	lp, err := limits.NewPlan(l, env)
	if err != nil {
		return limits.Plan{}, nil, &fault.Error{What: "limits", Why: err.Error(), Fix: "pass positive limits (--memory of at least 1M, --nofile of at least 4)"}
	}
	if base == "" || lp.Cgroup == (limits.Limits{}) {
		return lp, nil, nil
	}
	cg, err := limits.Create(base, "sandbox-run-"+runID, lp.Cgroup)
	if err != nil {
		return limits.Plan{}, nil, &fault.Error{What: "cannot create the run's cgroup in " + base, Why: err.Error(), Fix: "check the delegation of " + base + " or drop --cgroup-base"}
	}
	return lp, cg, nil
}
