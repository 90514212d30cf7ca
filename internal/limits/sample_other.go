//go:build !linux

package limits

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Usage is one sample of a process tree (see the Linux documentation).
type Usage struct {
	Memory, Held, Tasks int64
	CPU                 time.Duration
	Procs               int
}

// Sample is Linux only: elsewhere it returns an error wrapping
// errors.ErrUnsupported.
func Sample(ctx context.Context, rootPID int, l Limits, interval IntervalFunc, tmpfs ...string) (<-chan Exceeded, error) {
	return nil, fmt.Errorf("limits: sample on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// SampleOnce is Linux only: elsewhere it returns an error wrapping
// errors.ErrUnsupported.
func SampleOnce(rootPID int, confirm bool) (Usage, error) {
	return Usage{}, fmt.Errorf("limits: sample on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
