package sandbox

import (
	"context"

	"github.com/sandbox-run/sandbox-run/limits"
)

// sampleOff watches a tier-0 command's process tree for the sampled
// limits. Without a PID namespace a double-forked process leaves the tree
// and escapes the count: the report says "sampled", and tier 0 promises
// no more.
func sampleOff(ctx context.Context, pid int, l limits.Limits) <-chan limits.Exceeded {
	if l == (limits.Limits{}) {
		return nil
	}
	ch, err := limits.Sample(ctx, pid, l, limits.DefaultInterval)
	if err != nil {
		return nil
	}
	return ch
}
