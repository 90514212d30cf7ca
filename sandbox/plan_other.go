//go:build !linux

package sandbox

import (
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// planPaths plans by path (plan.ByPath) for a mechanism whose host asks
// for a plan (Seatbelt): the policy with its paths as the kernel names
// them, and those paths. Nothing is bound or held, so there is nothing
// to settle; a layout that only a mount plan can give is refused.
func planPaths(p policy.Policy, h mechanism.Host, _ mechanism.Config) (mechanism.Planned, func(*Result), error) {
	pd, settle := mechanism.Planned{Policy: p}, func(*Result) {}
	if h.Layout == nil {
		return pd, settle, nil
	}
	if *h.Layout != (plan.Layout{}) {
		return pd, settle, fault.New("sandbox: a mount plan", "exists only on Linux", "report this as a bug in sandbox-run")
	}
	q, paths, err := plan.ByPath(p)
	if err != nil {
		return pd, settle, err
	}
	pd.Policy, pd.Plan = q, &plan.Plan{Paths: paths}
	return pd, settle, nil
}

// planGuard is nil: a plan by path vets nothing it binds.
func planGuard(*plan.Plan) *pathguard.Guard { return nil }
