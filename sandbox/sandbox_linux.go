package sandbox

import (
	"fmt"

	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	bwmech "github.com/sandbox-run/sandbox-run/internal/mechanism/bwrap"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/policy"
)

func nativeMechanism(p policy.Policy, cmd []string, opts mechanism.Config) (mechanism.Mechanism, error) {
	return bwrapMechanism(p, cmd, opts)
}

func seatbeltMechanism(policy.Policy, []string, mechanism.Config) (mechanism.Mechanism, error) {
	return nil, fmt.Errorf("sandbox: --sandbox seatbelt exists only on macOS (%w); fix: leave out --sandbox: auto picks what this system has", ErrUnsupported)
}

// shownInside reports whether a host path is visible inside a bwrap
// sandbox under p (plan.ShownInside).
func shownInside(p policy.Policy) func(string) bool { return plan.ShownInside(p) }

func bwrapMechanism(p policy.Policy, cmd []string, opts mechanism.Config) (mechanism.Mechanism, error) {
	return bwmech.New(p, cmd, opts)
}

// lendsOwner reports whether m honours --map-owner: only bwrap does.
func lendsOwner(m mechanism.Mechanism) bool { return bwmech.LendsOwner(m) }
