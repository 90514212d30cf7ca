//go:build !linux

package sandbox

import (
	"fmt"

	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/policy"
)

func gvisorMechanism(policy.Policy, []string, mechanism.Config) (mechanism.Mechanism, error) {
	return nil, fmt.Errorf("sandbox: gvisor (tier 2) exists only on Linux (%w); fix: use --sandbox auto on this platform", ErrUnsupported)
}
