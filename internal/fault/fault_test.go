package fault

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

// TestError holds the one line, the sentinel and the cause: a wrapped
// *Error is found with errors.Is and errors.As, its cause too; control:
// another error matches neither.
func TestError(t *testing.T) {
	for _, c := range []struct {
		e    *Error
		want string
	}{
		{&Error{What: "w"}, "w"},
		{&Error{What: "w", Why: "y"}, "w: y"},
		{&Error{What: "w", Why: "y\nz", Fix: "f"}, "w: y z; fix: f"},
		{&Error{What: "w", Fix: "f", Err: fs.ErrNotExist}, "w; fix: f"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
	err := fmt.Errorf("run: %w", &Error{What: "w", Err: fs.ErrNotExist})
	var e *Error
	if !errors.Is(err, ErrSetup) || !errors.As(err, &e) || e.What != "w" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v: not found as an *Error with its cause", err)
	}
	if other := errors.New("w"); errors.Is(other, ErrSetup) || errors.As(other, &e) {
		t.Error("control: a plain error matched")
	}
}

func TestNewAndReason(t *testing.T) {
	err := New("bind /x", "it is a socket", "pass another path")
	if !errors.Is(err, ErrSetup) || err.Error() != "bind /x: it is a socket; fix: pass another path" {
		t.Fatalf("New = %v", err)
	}
	pe := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}
	if got := Reason(fmt.Errorf("wrapped: %w", pe)); got != fs.ErrNotExist.Error() {
		t.Fatalf("Reason(PathError) = %q", got)
	}
	if got := Reason(errors.New("plain")); got != "plain" {
		t.Fatalf("Reason(plain) = %q", got)
	}
}
