//go:build !linux

package sandbox

import (
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/policy"
)

func imageMechanism(policy.Policy, []string, Options) (mechanism.Mechanism, error) {
	return nil, fault.New("--image", "container images run under gVisor, which exists only on Linux", "drop --image, or run on Linux")
}
