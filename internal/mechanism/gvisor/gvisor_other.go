//go:build !linux

package gvisor

import (
	"fmt"

	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/policy"
)

func New(policy.Policy, []string, mechanism.Config) (mechanism.Mechanism, error) {
	return nil, fmt.Errorf("sandbox: gvisor (tier 2) exists only on Linux (%w); fix: use --sandbox auto on this platform", mechanism.ErrUnsupported)
}
