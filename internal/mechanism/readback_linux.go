package mechanism

import (
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/report"
)

// ReadbackOf is a copy of init's read-back for the report (the same
// type; Namespaces shared); nil for nil.
func ReadbackOf(rb *initproc.Readback) *report.Readback {
	if rb == nil {
		return nil
	}
	out := *rb
	if k := rb.Kernel; k != nil {
		kc := *k
		out.Kernel = &kc
	}
	return &out
}
