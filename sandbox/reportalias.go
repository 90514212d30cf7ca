package sandbox

import (
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
)

// A run's outcome and the error of a command that could not start are the
// mechanisms' (internal/mechanism): these names keep them for callers.
type (
	Result    = mechanism.Result
	ExecError = mechanism.ExecError
)

// ErrUnsupported means the requested mechanism does not exist on this
// platform. It matches errors.ErrUnsupported.
var ErrUnsupported = mechanism.ErrUnsupported
