//go:build !linux && !darwin

package limits

import (
	"errors"
	"fmt"
	"runtime"
)

// Apply is not supported on this platform: it returns an error wrapping
// errors.ErrUnsupported unless rs is empty.
func Apply(rs []Rlimit) error {
	if len(rs) == 0 {
		return nil
	}
	return fmt.Errorf("limits: apply: rlimits on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// Hard is not supported on this platform: it returns an error wrapping
// errors.ErrUnsupported.
func Hard(r Resource) (uint64, error) {
	return 0, fmt.Errorf("limits: hard %s: rlimits on %s: %w", r, runtime.GOOS, errors.ErrUnsupported)
}
