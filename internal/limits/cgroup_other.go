//go:build !linux

package limits

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
)

func unsupported(op string) error {
	return fmt.Errorf("limits: %s: cgroups on %s: %w", op, runtime.GOOS, errors.Join(ErrNoCgroup, errors.ErrUnsupported))
}

// FindDelegated is Linux only: elsewhere it returns an error wrapping
// ErrNoCgroup and errors.ErrUnsupported.
func FindDelegated(base string) (string, error) { return "", unsupported("find cgroup") }

// Enabled is Linux only.
func Enabled(base string) (memory, pids bool, err error) {
	return false, false, unsupported("cgroup controllers")
}

// Create is Linux only.
func Create(base, name string, l Limits) (*Cgroup, error) { return nil, unsupported("create cgroup") }

// Cgroup is a Linux cgroup; no value of it exists on this platform.
type Cgroup struct{}

func (c *Cgroup) Path() string                    { return "" }
func (c *Cgroup) FD() int                         { return -1 }
func (c *Cgroup) Limits() Limits                  { return Limits{} }
func (c *Cgroup) Kill() error                     { return unsupported("kill cgroup") }
func (c *Cgroup) Procs() ([]int, error)           { return nil, unsupported("cgroup") }
func (c *Cgroup) Populated() (bool, error)        { return false, unsupported("cgroup") }
func (c *Cgroup) Events() (Events, error)         { return Events{}, unsupported("cgroup") }
func (c *Cgroup) CPUTime() (time.Duration, error) { return 0, unsupported("cgroup") }
func (c *Cgroup) MemoryPeak() (int64, error)      { return 0, unsupported("cgroup") }
func (c *Cgroup) Close() error                    { return nil }
func (c *Cgroup) Exceeded() (Exceeded, bool)      { return Exceeded{}, false }
func (c *Cgroup) Watch(ctx context.Context, d time.Duration) <-chan Exceeded {
	ch := make(chan Exceeded)
	close(ch)
	return ch
}

// DefaultMemory is Linux only: elsewhere it returns an error wrapping
// errors.ErrUnsupported.
func DefaultMemory() (int64, error) { return 0, unsupported("default memory ceiling") }
