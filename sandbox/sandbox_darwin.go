package sandbox

import (
	"fmt"

	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/mechanism/seatbelt"
	"github.com/sandbox-run/sandbox-run/policy"
)

func nativeMechanism(p policy.Policy, cmd []string, opts mechanism.Config) (mechanism.Mechanism, error) {
	return seatbeltMechanism(p, cmd, opts)
}

func bwrapMechanism(policy.Policy, []string, mechanism.Config) (mechanism.Mechanism, error) {
	return nil, fmt.Errorf("sandbox: bwrap exists only on Linux: %w", ErrUnsupported)
}

func seatbeltMechanism(p policy.Policy, cmd []string, opts mechanism.Config) (mechanism.Mechanism, error) {
	return seatbelt.New(p, cmd, opts), nil
}

// shownInside is nil: Seatbelt's profile, not a mount plan, decides what
// the command sees.
func shownInside(policy.Policy) func(string) bool { return nil }
