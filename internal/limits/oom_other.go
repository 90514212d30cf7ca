//go:build !linux

package limits

import (
	"errors"
	"fmt"
	"runtime"
)

// RaiseOOMScore is Linux only: elsewhere it returns an error wrapping
// errors.ErrUnsupported.
func RaiseOOMScore() error { return SetOOMScore(0) }

// SetOOMScore is Linux only.
func SetOOMScore(pid int) error {
	return fmt.Errorf("limits: oom_score_adj on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// OOMScore is Linux only.
func OOMScore(pid int) (int, error) {
	return 0, fmt.Errorf("limits: oom_score_adj on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
