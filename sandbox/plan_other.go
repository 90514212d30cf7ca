//go:build !linux

package sandbox

import (
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/policy"
)

// planPaths plans no mount: only Linux's mechanisms take a plan, and
// one that asked for it elsewhere is refused.
func planPaths(p policy.Policy, h mechanism.Host, _ mechanism.Config) (mechanism.Planned, func(*Result), error) {
	if h.Layout != nil {
		return mechanism.Planned{}, nil, fault.New("sandbox: a mount plan", "exists only on Linux", "report this as a bug in sandbox-run")
	}
	return mechanism.Planned{Policy: p}, func(*Result) {}, nil
}
