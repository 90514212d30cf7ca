//go:build !linux && !darwin

package matrix

import (
	"context"
	"fmt"
	"runtime"
)

// Run runs the escape matrix. This build has no runner for this platform
// yet: the rows for it exist in egress-cases.json, but nothing exercises
// them here.
func Run(ctx context.Context, cases []Case, opts RunOptions) ([]Result, error) {
	return nil, fmt.Errorf("matrix: the escape matrix has no runner on %s yet", runtime.GOOS)
}

// RunOptions say how to run the matrix (see the Linux build).
type RunOptions struct {
	Binary    string
	Mechanism string
	Filter    func(Case) bool
	Parallel  int
}
