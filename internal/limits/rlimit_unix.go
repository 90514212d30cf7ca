//go:build linux || darwin

package limits

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

var resourceNumber = map[Resource]int{
	Core:   unix.RLIMIT_CORE,
	NoFile: unix.RLIMIT_NOFILE,
	FSize:  unix.RLIMIT_FSIZE,
	CPU:    unix.RLIMIT_CPU,
	NProc:  unix.RLIMIT_NPROC,
	Data:   unix.RLIMIT_DATA,
}

// Apply sets rs on the calling process; children it starts afterwards
// inherit them. It only ever tightens: a value above the current hard
// limit is lowered to it (an unprivileged process could not raise it, and
// a privileged one should not). It stops at the first failure and returns
// an error naming the resource and wrapping the errno.
//
// Apply limits the caller too. In sandbox-run that is init: its own
// descriptors count against NoFile, its threads against NProc, its CPU
// against CPU. It goes through syscall.Setrlimit, not a raw system call,
// because the Go runtime raises its soft RLIMIT_NOFILE at start-up and
// restores the original in every child it starts unless the limit was set
// through syscall.Setrlimit.
func Apply(rs []Rlimit) error {
	for _, r := range rs {
		n, ok := resourceNumber[r.Resource]
		if !ok {
			return fmt.Errorf("limits: apply %s: unknown resource: %w", r.Resource, ErrInvalid)
		}
		if r.Soft > r.Hard {
			return fmt.Errorf("limits: apply %s: soft %d above hard %d: %w", r.Resource, r.Soft, r.Hard, ErrInvalid)
		}
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(n, &cur); err != nil {
			return fmt.Errorf("limits: apply %s: getrlimit: %w", r.Resource, err)
		}
		want := syscall.Rlimit{Cur: min(r.Soft, cur.Max), Max: min(r.Hard, cur.Max)}
		if err := syscall.Setrlimit(n, &want); err != nil {
			return fmt.Errorf("limits: apply %s=%d:%d: %w", r.Resource, want.Cur, want.Max, err)
		}
	}
	return nil
}

// Hard returns the calling process's hard limit for r, which every process
// it starts inherits and none can raise: a ceiling above it is not held at
// the value asked for.
func Hard(r Resource) (uint64, error) {
	n, ok := resourceNumber[r]
	if !ok {
		return 0, fmt.Errorf("limits: hard %s: unknown resource: %w", r, ErrInvalid)
	}
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(n, &cur); err != nil {
		return 0, fmt.Errorf("limits: hard %s: getrlimit: %w", r, err)
	}
	return cur.Max, nil
}
