//go:build linux

package mechanism

import (
	"context"

	"github.com/sandbox-run/sandbox-run/internal/limits"
)

// SamplerAvailable says whether tier 0 can sample limits here.
const SamplerAvailable = true

// Sample watches a tier-0 command's process tree for the sampled
// limits. Without a PID namespace a double-forked process leaves the tree
// and escapes the count: the report says "sampled", and tier 0 promises
// no more. An error means nothing watches them: the caller must not run.
func Sample(ctx context.Context, pid int, l limits.Limits) (<-chan limits.Exceeded, error) {
	if l == (limits.Limits{}) {
		return nil, nil
	}
	return limits.Sample(ctx, pid, l, limits.DefaultInterval)
}

// RaiseOOM sets limits.OOMScoreAdj on pid and every process below it
// (tier 0's and Landlock's shim, which also raises its own before it
// becomes the command; runsc's sandbox processes) and returns the lowest
// value read back, nil when none could be read: the report never
// assumes it.
func RaiseOOM(pid int) *int {
	var low *int
	for _, p := range limits.Tree(pid) {
		limits.SetOOMScore(p)
		if v, err := limits.OOMScore(p); err == nil && (low == nil || v < *low) {
			low = &v
		}
	}
	return low
}
