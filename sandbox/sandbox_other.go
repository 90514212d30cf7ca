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
	return nil, fmt.Errorf("sandbox: seatbelt exists only on macOS: %w", ErrUnsupported)
}
