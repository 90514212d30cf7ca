// Package fault holds sandbox-run's one error type for a refusal or a
// failed set-up: what could not be done, why, and the fix, said in one
// line. sandbox.SetupError, bwrap.SetupError and apparmor.Error are this
// type under their packages' names, so that a caller compares any of them
// with errors.Is(err, fault.ErrSetup) (or the packages' names for it) and
// reads its parts with errors.As, never from its text.
//
// It imports nothing of the project: the leaves that refuse (apparmor,
// bwrap's diagnosis) may use it and stay leaves.
package fault

import (
	"errors"
	"io/fs"
	"strings"
)

// ErrSetup is matched by every *Error: something could not be set up or
// was refused, and the command did not run. Callers exit 125.
var ErrSetup = errors.New("sandbox: setup failed")

// Error says what failed, why and the fix, in one line. Err, when set, is
// the typed error of the package that found the cause (a
// *pathguard.EscapeError), reachable with errors.As; its text is not part
// of the line.
type Error struct {
	What, Why, Fix string
	Err            error
}

// Error returns "what: why; fix: fix", without the parts that are empty
// and with every newline made a space.
func (e *Error) Error() string {
	s := e.What
	if e.Why != "" {
		s += ": " + e.Why
	}
	if e.Fix != "" {
		s += "; fix: " + e.Fix
	}
	return strings.ReplaceAll(s, "\n", " ")
}

// Is matches ErrSetup.
func (e *Error) Is(target error) bool { return target == ErrSetup }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error that says what failed, why, and the fix.
func New(what, why, fix string) error { return &Error{What: what, Why: why, Fix: fix} }

// Reason is the text of err without the path an *fs.PathError names: the
// why of an error whose what already names the path.
func Reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
