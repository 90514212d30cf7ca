package filter

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

var (
	// ErrNoYama is wrapped by YamaPtraceScope when the kernel has no Yama
	// LSM, so kernel.yama.ptrace_scope does not exist.
	ErrNoYama = errors.New("filter: kernel has no Yama LSM")

	// ErrPtraceRefused is wrapped by every error CheckPtrace returns.
	ErrPtraceRefused = errors.New("filter: --ptrace refused")
)

// yamaPtraceScopePath is the sysctl kernel.yama.ptrace_scope.
const yamaPtraceScopePath = "/proc/sys/kernel/yama/ptrace_scope"

// YamaPtraceScope reads kernel.yama.ptrace_scope (0 classic, 1 restricted
// to descendants, 2 admin only, 3 no attach). When the file does not exist
// the error wraps ErrNoYama (and fs.ErrNotExist); any other failure, or
// content that is not a number, is returned wrapped as it is. It reads the
// file on every call and caches nothing.
func YamaPtraceScope() (int, error) { return readPtraceScope(yamaPtraceScopePath) }

func readPtraceScope(path string) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("filter: read %s: %w: %w", path, ErrNoYama, err)
	}
	if err != nil {
		return 0, fmt.Errorf("filter: read ptrace scope: %w", err)
	}
	s := strings.TrimSpace(string(b))
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("filter: %s holds %q, not a number: %w", path, s, err)
	}
	return n, nil
}

// CheckPtrace decides whether --ptrace may widen the filter, from what
// YamaPtraceScope returned. It returns nil only when err is nil and scope is
// 1 or more: then a traced process can only be a descendant of the tracer
// (or tracing needs CAP_SYS_PTRACE, or is off), so the command cannot
// attach to sandbox-run's own init or to anything else it can see. Every
// other case returns a *PtraceError (matching ErrPtraceRefused, wrapping
// err if any) that says why and how to fix it. CheckPtrace is pure.
func CheckPtrace(scope int, err error) error {
	const without = ", or run without --ptrace"
	switch {
	case errors.Is(err, ErrNoYama):
		return &PtraceError{Err: err,
			Reason: "the kernel has no Yama LSM (" + yamaPtraceScopePath + " is absent), so nothing would stop the command " +
				"from attaching to any process of its uid that it can see, such as sandbox-run's own init inside the sandbox",
			Fix: "boot a kernel with Yama (CONFIG_SECURITY_YAMA=y, yama in lsm=) and set kernel.yama.ptrace_scope=1" + without}
	case err != nil:
		return &PtraceError{Err: err,
			Reason: "kernel.yama.ptrace_scope cannot be read (" + err.Error() + "), so it is not known to be 1 or more",
			Fix:    "make " + yamaPtraceScopePath + " readable" + without}
	case scope < 1:
		return &PtraceError{
			Reason: fmt.Sprintf("kernel.yama.ptrace_scope is %d (classic ptrace), so the command could attach to "+
				"any process of its uid that it can see, such as sandbox-run's own init inside the sandbox", scope),
			Fix: "sysctl -w kernel.yama.ptrace_scope=1" + without}
	}
	return nil
}

// PtraceError is CheckPtrace's refusal: why --ptrace cannot be allowed
// here and the fix. It matches ErrPtraceRefused; Err is what reading the
// setting failed with, nil when it was read.
type PtraceError struct {
	Reason, Fix string
	Err         error
}

func (e *PtraceError) Error() string {
	return "--ptrace refused: " + e.Reason + "; fix: " + e.Fix
}

// Is matches ErrPtraceRefused.
func (e *PtraceError) Is(target error) bool { return target == ErrPtraceRefused }

func (e *PtraceError) Unwrap() error { return e.Err }
