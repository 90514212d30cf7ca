package sandbox

import (
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// planPaths builds the run's plan once, as the mechanism's host asks
// (h.Layout; none without one): the policy's state dirs for the ids the
// sandbox's files are accessed as, then the mount plan under the
// protection journal (plan.Start). settle, never nil, releases the plan
// and settles the journal once the sandbox is gone: what the command
// changed at a protected path is quarantined and named in res's report
// (nil: the command never ran) and on cfg's stderr.
func planPaths(p policy.Policy, h mechanism.Host, cfg mechanism.Config) (pd mechanism.Planned, settle func(*Result), err error) {
	pd, settle = mechanism.Planned{Policy: p}, func(*Result) {}
	if h.Layout == nil {
		return pd, settle, nil
	}
	p, own, err := plan.PrepareState(p, cfg.DataDir, h.UID, h.GID)
	if err != nil {
		return pd, settle, err
	}
	rv := cfg.Resolver
	if len(own) > 0 {
		// PrepareState has just made (or set aside and made again) the
		// session's and caches' directories: walk them afresh.
		rv = pathguard.NewResolver()
	}
	j := plan.Journal{Cache: cfg.BwrapCache, RunID: cfg.RunID, Dry: cfg.DryRun != nil, Audit: cfg.Audit, Hooks: cfg.Protect}
	pl, pend, err := plan.Start(rv, p, own, h.UID, h.GID, *h.Layout, j)
	if err != nil {
		return pd, settle, err
	}
	stderr := cfg.Stderr
	settle = func(res *Result) {
		pl.Close()
		rep, code := res.Parts()
		pend.Finish(rep, code, stderr)
	}
	pd.Policy, pd.Plan = p, pl
	return pd, settle, nil
}

// planGuard is the guard that vetted the plan's sources (nil: no plan).
func planGuard(pl *plan.Plan) *pathguard.Guard {
	if pl == nil {
		return nil
	}
	return pl.Guard
}
