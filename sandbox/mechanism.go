package sandbox

import (
	"context"
	"fmt"
	"io"

	"github.com/sandbox-run/sandbox-run/internal/audit"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/policy"
)

// mechanism is one way of running a command under a policy: bwrap,
// landlock, gvisor, seatbelt or none (tier 0). Run drives each one through
// the same steps, so that what a run checks, reports and audits does not
// depend on which mechanism ran it; a new mechanism is one file that
// implements this.
type mechanism interface {
	// prepare checks the host and sets up everything short of starting
	// the command. The report it returns claims only what is set up and
	// is final but for what the run itself reads back. An error means the
	// command never runs.
	prepare(ctx context.Context) (*Report, error)
	// describe writes what would run for --dry-run, values redacted.
	describe(w io.Writer)
	// run starts the command and returns once it and everything it
	// started have ended, with the report completed: read-backs, Exit,
	// Egress. Its error follows Run's contract.
	run(ctx context.Context) (*Result, error)
	// close releases what prepare and run set up, in the reverse order;
	// res is what run returned (nil when it did not run), for what is
	// settled only once the sandbox is gone (the quarantine of the
	// protected paths). It is called once, whatever happened before.
	close(res *Result)
}

// newMechanism returns the mechanism the policy's mode names on this
// platform.
func newMechanism(p policy.Policy, cmd []string, opts Options) (mechanism, error) {
	if opts.Image.Ref != "" {
		return imageMechanism(p, cmd, opts)
	}
	switch p.Sandbox {
	case policy.ModeOff:
		return &offRun{p: p, cmd: cmd, opts: opts}, nil
	case policy.ModeAuto:
		return nativeMechanism(p, cmd, opts)
	case policy.ModeBwrap:
		return bwrapMechanism(p, cmd, opts)
	case policy.ModeSeatbelt:
		return seatbeltMechanism(p, cmd, opts)
	case policy.ModeGvisor:
		return gvisorMechanism(p, cmd, opts)
	case policy.ModeLandlock:
		return landlockMechanism(p, cmd, opts)
	}
	return nil, fmt.Errorf("sandbox: mode %q: %w", p.Sandbox, ErrUnsupported)
}

// runMechanism is the run skeleton under Run's checks and timer: prepare,
// then describe (a dry run) or audit the start, run and audit the end;
// close in every case.
func runMechanism(ctx context.Context, p policy.Policy, cmd []string, opts Options) (res *Result, err error) {
	m, err := newMechanism(p, cmd, opts)
	if err != nil {
		return nil, err
	}
	if opts.MapOwner && !lendsOwner(m) {
		return nil, fault.New("--map-owner", "only bwrap on Linux lends the workdir's owner", "pass --sandbox bwrap, or leave out --map-owner")
	}
	defer func() { m.close(res) }()
	rep, err := m.prepare(ctx)
	if err != nil {
		return nil, err
	}
	rep.Schema = ReportSchema
	rep.Secrets = secretsReport(p)
	if opts.DryRun != nil {
		m.describe(opts.DryRun)
		return &Result{Report: *rep}, nil
	}
	start := map[string]any{"tier": rep.Tier, "mechanism": rep.Mechanism, "command": cmd[0],
		"network": rep.Network, "allow_hosts": p.AllowHosts}
	if len(rep.Secrets) > 0 {
		start["secrets"] = secretNames(rep.Secrets)
	}
	if a, ok := m.(auditStarter); ok {
		for k, v := range a.auditStart() {
			start[k] = v
		}
	}
	audit.Event(opts.Audit, rep.RunID, "run_start", start)
	res, err = m.run(ctx)
	end := map[string]any{}
	if res != nil {
		res.Report.Schema = ReportSchema
		end["exit"] = res.ExitCode
		if res.Report.Egress != nil {
			end["egress"] = res.Report.Egress
		}
		if res.Report.Refused = opts.Refusals.List(); len(res.Report.Refused) > 0 {
			end["refused"] = res.Report.Refused
		}
	}
	if err != nil {
		end["error"] = err.Error()
	}
	audit.Event(opts.Audit, rep.RunID, "run_end", end)
	return res, err
}

// auditStarter is a mechanism with fields of its own for the run_start
// audit event.
type auditStarter interface {
	auditStart() map[string]any
}

// cleanups is a stack of what to undo, run last in, first out: a
// mechanism pushes each release as it acquires the thing released.
type cleanups []func()

func (c *cleanups) push(f func()) { *c = append(*c, f) }

// run runs and forgets every cleanup, the last pushed first.
func (c *cleanups) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}
