//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"runtime"

	"github.com/sandbox-run/sandbox-run/internal/limits"
)

// samplerAvailable says whether tier 0 can sample limits here: not
// without /proc. runOff refuses a sampled limit first.
const samplerAvailable = false

func sampleOff(_ context.Context, _ int, l limits.Limits) (<-chan limits.Exceeded, error) {
	if l == (limits.Limits{}) {
		return nil, nil
	}
	return nil, fmt.Errorf("no process sampler on %s: %w", runtime.GOOS, ErrUnsupported)
}

// raiseOOM is Linux only: elsewhere nothing is raised or read back.
func raiseOOM(int) *int { return nil }
