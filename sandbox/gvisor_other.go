//go:build !linux

package sandbox

import (
	"context"
	"fmt"

	"github.com/sandbox-run/sandbox-run/policy"
)

func runGvisor(context.Context, policy.Policy, []string, Options) (*Result, error) {
	return nil, fmt.Errorf("sandbox: gvisor (tier 2) exists only on Linux (%w); fix: use --sandbox auto on this platform", ErrUnsupported)
}
