//go:build !linux && !darwin

package sandbox

import (
	"fmt"

	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/policy"
)

func nativeMechanism(p policy.Policy, cmd []string, opts mechanism.Config) (mechanism.Mechanism, error) {
	return seatbeltMechanism(p, cmd, opts)
}

func bwrapMechanism(policy.Policy, []string, mechanism.Config) (mechanism.Mechanism, error) {
	return nil, fmt.Errorf("sandbox: bwrap exists only on Linux: %w", ErrUnsupported)
}

func seatbeltMechanism(policy.Policy, []string, mechanism.Config) (mechanism.Mechanism, error) {
	return nil, fmt.Errorf("sandbox: --sandbox seatbelt exists only on macOS (%w); fix: leave out --sandbox: auto picks what this system has", ErrUnsupported)
}

// shownInside is nil: no mechanism here decides visibility.
func shownInside(policy.Policy) func(string) bool { return nil }
