//go:build !linux

package sandbox

import (
	"context"

	"github.com/sandbox-run/sandbox-run/limits"
)

func sampleOff(context.Context, int, limits.Limits) <-chan limits.Exceeded { return nil }
