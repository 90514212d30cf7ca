//go:build !linux && !darwin

package sandbox

import (
	"context"
	"fmt"

	"github.com/sandbox-run/sandbox-run/policy"
)

func runNative(ctx context.Context, p policy.Policy, cmd []string, opts Options) (*Result, error) {
	return runSeatbelt(ctx, p, cmd, opts)
}

func runBwrap(context.Context, policy.Policy, []string, Options) (*Result, error) {
	return nil, fmt.Errorf("sandbox: bwrap exists only on Linux: %w", ErrUnsupported)
}

func runSeatbelt(context.Context, policy.Policy, []string, Options) (*Result, error) {
	return nil, fmt.Errorf("sandbox: --sandbox seatbelt exists only on macOS (%w); fix: leave out --sandbox: auto picks what this system has", ErrUnsupported)
}

// shownInside is nil: no mechanism here decides visibility.
func shownInside(policy.Policy) func(string) bool { return nil }
