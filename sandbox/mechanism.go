package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/audit"
	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostnet"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/terminal"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// newMechanism returns the mechanism the policy's mode names on this
// platform (mechanisms), or the image's (imageMechanism).
func newMechanism(p policy.Policy, cmd []string, opts mechanism.Config) (mechanism.Mechanism, error) {
	if opts.Image != nil {
		return imageMechanism(p, cmd, opts)
	}
	return mechanismFor(p, cmd, opts)
}

// mechanismFor is the mechanism of this platform's table that p.Sandbox
// names.
func mechanismFor(p policy.Policy, cmd []string, opts mechanism.Config) (mechanism.Mechanism, error) {
	newM, ok := mechanisms()[p.Sandbox]
	switch {
	case ok:
		return newM(p, cmd, opts)
	case p.Sandbox == policy.ModeAuto:
		return nil, fmt.Errorf("sandbox: no sandbox exists on %s (%w); fix: run on Linux or macOS, or ask for tier 0 with --sandbox off", runtime.GOOS, ErrUnsupported)
	}
	where := "Linux"
	if p.Sandbox == policy.ModeSeatbelt {
		where = "macOS"
	}
	return nil, fmt.Errorf("sandbox: --sandbox %s exists only on %s (%w); fix: leave out --sandbox: auto picks what this system has", p.Sandbox, where, ErrUnsupported)
}

// runMechanism is the run skeleton under Run's checks and timer: prepare,
// then describe (a dry run) or audit the start, run and audit the end;
// close in every case.
func runMechanism(ctx context.Context, p policy.Policy, cmd []string, opts Options) (res *Result, err error) {
	cfg := opts.config(p)
	m, err := newMechanism(p, cmd, cfg)
	if err != nil {
		return nil, err
	}
	if _, lends := m.(mechanism.OwnerLender); opts.MapOwner && !lends {
		return nil, fault.New("--map-owner", "only bwrap on Linux lends the workdir's owner", "pass --sandbox bwrap, or leave out --map-owner")
	}
	settle := func(*Result) {}
	// The plan outlives the mechanism: its protected paths are settled
	// once the sandbox is gone.
	defer func() { m.Close(res); settle(res) }()
	host, pd, err := prepare(ctx, m, p, cfg, &settle)
	if err != nil {
		return nil, err
	}
	nw, err := hostnet.Start(ctx, pd.Net, hostnet.Run{RunID: cfg.RunID, Audit: cfg.Audit, Refusals: cfg.Refusals, Logger: cfg.Log(), LookupEnv: cfg.LookupEnv})
	if err != nil {
		return nil, err
	}
	// Before the mechanism's own release: nothing serves the sandbox
	// once it is being taken down.
	defer nw.Close()
	setup := mechanism.Setup{Net: nw}
	if host.Terminal {
		tty, err := openTerminal(p, opts, &setup)
		if err != nil {
			return nil, err
		}
		// Closed first: the command's last output, then the caller's
		// terminal back, then what the mechanism says as it closes.
		defer tty.Close()
	}
	rep, err := m.Attach(ctx, setup)
	if err != nil {
		return nil, err
	}
	rep.HandIn = nw.HandIn()
	stamp(rep, p, cfg.RunID)
	if opts.DryRun != nil {
		m.Describe(opts.DryRun)
		return &Result{Report: *rep}, nil
	}
	start := map[string]any{"tier": rep.Tier, "mechanism": rep.Mechanism, "command": cmd[0],
		"network": rep.Network, "allow_hosts": p.AllowHosts}
	if len(rep.Secrets) > 0 {
		start["secrets"] = secretNames(rep.Secrets)
	}
	if a, ok := m.(mechanism.AuditStarter); ok {
		for k, v := range a.AuditStart() {
			start[k] = v
		}
	}
	audit.Event(opts.Audit, rep.RunID, "run_start", start)
	res, err = runCommand(ctx, m, nw, *rep, opts.Signals)
	end := map[string]any{}
	if res != nil {
		res.Report.Schema, res.Report.RunID, res.Report.Platform = rep.Schema, rep.RunID, rep.Platform
		res.Report.TimeoutSec, res.Report.EnvironmentDigest = rep.TimeoutSec, rep.EnvironmentDigest
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

// prepare asks the mechanism what it can enforce here (Probe), plans the
// run once as it asks (the state dirs, the path plan under the
// protection journal, the network, the limits) and hands the plan to its
// Prepare; settle is set to what releases the plan once the sandbox is
// gone.
func prepare(ctx context.Context, m mechanism.Mechanism, p policy.Policy, cfg mechanism.Config, settle *func(*Result)) (mechanism.Host, mechanism.Planned, error) {
	host, err := m.Probe(ctx)
	if err != nil {
		return host, mechanism.Planned{}, err
	}
	pd, s, err := planPaths(p, host, cfg)
	if err != nil {
		return host, pd, err
	}
	*settle = s
	pd.Net = planNet(host, pd)
	if pd.Limits, pd.DefaultMemory, err = planLimits(pd.Policy, host.Ceilings); err != nil {
		return host, pd, err
	}
	return host, pd, m.Prepare(ctx, pd)
}

// planNet is the run's network: what the host reaches, for the planned
// policy (its state dirs made, its paths as the host names them) and
// ids, with the plan's guard for what the network hands in.
func planNet(h mechanism.Host, pd mechanism.Planned) hostnet.Request {
	return hostnet.Request{Reach: h.Net, Policy: pd.Policy, UID: h.UID, GID: h.GID, Root: h.Root, Guard: planGuard(pd.Plan)}
}

// planLimits is the run's limits: the policy's with the default
// ceilings where the mechanism holds them (mechanism.RunLimits, which
// refuses a host whose memory it cannot read), the policy's alone
// elsewhere.
func planLimits(p policy.Policy, ceilings bool) (limits.Limits, bool, error) {
	if ceilings {
		return mechanism.RunLimits(p)
	}
	return mechanism.PolicyLimits(p), false, nil
}

// openTerminal gives the command a pseudo-terminal of its own, relayed to
// the caller's, and the caller's TERM unless the policy sets one.
func openTerminal(p policy.Policy, opts Options, s *mechanism.Setup) (*terminal.Terminal, error) {
	var in io.Reader = opts.Terminal
	var out io.Writer = io.Discard
	if opts.Stdin != nil {
		in = opts.Stdin
	}
	if opts.Stdout != nil {
		out = opts.Stdout
	}
	tty, err := terminal.Open(opts.Terminal, in, out)
	if err != nil {
		return nil, err
	}
	s.TTY = tty.Command()
	if _, set := p.Env["TERM"]; !set && opts.LookupEnv != nil {
		if term, ok := opts.LookupEnv("TERM"); ok {
			s.Env = map[string]string{"TERM": term}
		}
	}
	return tty, nil
}

// runCommand starts the command, holds it through the one supervision
// loop and classifies its end; once the sandbox is gone, the network is
// stopped and waited for, so that every connection has ended and
// counted its bytes.
func runCommand(ctx context.Context, m mechanism.Mechanism, nw hostnet.Net, rep report.Report, signals <-chan os.Signal) (*Result, error) {
	proc, err := m.Start(ctx)
	if err != nil {
		return classify(ctx, mechanism.Ended{Report: rep}, mechanism.Ending{}, err)
	}
	end := mechanism.Supervise(ctx, proc, signals)
	e, err := m.Finish(ctx, end)
	nw.Close()
	e.Report.Egress = nw.Counts()
	return classify(ctx, e, end, err)
}

// classify is the run's Result and error from how its command ended,
// whatever the mechanism: not runnable (126, 127), the mechanism killed
// from outside, a set-up failure (no Result), a start that failed
// closed, ctx, a limit (the loop's, or one the mechanism found beside
// it), or the command's own status. Run then names a timer's end and
// outcome turns the limit's and ctx's errors into the Exit's class and
// reason.
func classify(ctx context.Context, e mechanism.Ended, end mechanism.Ending, err error) (*Result, error) {
	var ee *mechanism.ExecError
	var ke *mechanism.KilledError
	switch {
	case end.StartErr != nil:
		return nil, end.StartErr
	case errors.As(err, &ee):
		e.Report.Exit = &report.Exit{Code: ee.Code, Class: report.ExecClass(ee.Code)}
		return &Result{ExitCode: ee.Code, Report: e.Report}, err
	case errors.As(err, &ke):
		e.Report.Exit = &report.Exit{Code: exitcode.Setup, Class: report.ClassMechanismKilled}
		return &Result{ExitCode: exitcode.Setup, Report: e.Report}, err
	case err != nil:
		return nil, err
	}
	res := &Result{ExitCode: e.Code, Report: e.Report}
	limit := e.Limit
	if limit == nil {
		limit = end.Exceeded
	}
	switch {
	case end.Cancelled:
		res.Report.Exit = report.Classify(e.Code, "")
		return res, mechanism.CtxErr(ctx)
	case limit != nil:
		res.Report.Exit = report.Classify(e.Code, mechanism.LimitClass(limit.Kind))
		return res, &mechanism.LimitError{Exceeded: *limit}
	}
	res.Report.Exit = report.Classify(e.Code, "")
	return res, nil
}

// stamp fills in what every run's report says alike, whatever the
// mechanism: the schema, the run's name, the platform, the timeout, the
// secrets, and last the environment's digest over what Prepare set up.
func stamp(rep *report.Report, p policy.Policy, runID string) {
	rep.Schema = report.ReportSchema
	rep.RunID = runID
	rep.Platform = mechanism.Platform()
	rep.TimeoutSec = time.Duration(p.Timeout).Seconds()
	rep.Secrets = secretsReport(p)
	rep.EnvironmentDigest = report.Digest(rep)
}
