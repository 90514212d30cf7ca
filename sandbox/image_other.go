//go:build !linux

package sandbox

import (
	"context"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/ociimage"
	"github.com/sandbox-run/sandbox-run/policy"
)

func imageMechanism(policy.Policy, []string, mechanism.Config) (mechanism.Mechanism, error) {
	return nil, fault.New("--image", "container images run under gVisor, which exists only on Linux", "drop --image, or run on Linux")
}

// resolveImage is never reached: imageMechanism refuses first.
func resolveImage(context.Context, policy.Policy, Options) (*ociimage.Image, error) {
	return nil, nil
}
