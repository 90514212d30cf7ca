//go:build !linux

package pathguard

import (
	"errors"
	"fmt"
	"os"
)

// Open is Linux only (O_PATH descriptors for bwrap's --ro-bind-fd). Here it
// always fails with an error wrapping errors.ErrUnsupported.
func (r Resolution) Open() (*os.File, error) {
	return nil, fmt.Errorf("pathguard: open %s: %w", r.Path, errors.ErrUnsupported)
}
