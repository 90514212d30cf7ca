package pathguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Resolver resolves paths like [Resolve] and remembers what each Lstat and
// Readlink it made found, so that the many walks of one plan (every bind
// source, the writable dirs, the host files, the toolchain directories)
// look up "/", "/usr" or the home directory once instead of once per walk.
// A nil *Resolver remembers nothing: each walk asks the file system.
//
// What is guaranteed: a Resolver's answers are those of one snapshot of the
// file system, taken component by component as its walks first reach them;
// every check made through one Resolver agrees with every other. Only
// components that existed are remembered: a path that was absent is looked
// up again, so a file the plan creates after a walk missed it is found.
//
// What is not: the snapshot is not refreshed. A component replaced after it
// was remembered (a directory swapped for a link, a file renamed over) is
// still described as it was. That weakens nothing a single walk promised:
// a walk already describes the file system as it was, and binding by the
// path string was already racy. What makes a bind safe is
// [Resolution.Open], which opens the resolved path without following any
// link and refuses ([ErrChanged]) an inode other than the one the walk
// recorded, and the host-file openers ([OpenFile], [WriteFile]), which
// follow no link at all; neither reads the memo. A stale memo can therefore
// make Open fail, never make it open something else. Use one Resolver for
// one plan (a snapshot), and a new one (or nil) for a path the plan itself
// replaces after it resolved it.
//
// A Resolver is safe for concurrent use.
type Resolver struct {
	mu    sync.Mutex
	stat  map[string]fs.FileInfo
	link  map[string]string
	calls int
}

// NewResolver returns a Resolver with an empty memo.
func NewResolver() *Resolver {
	return &Resolver{stat: map[string]fs.FileInfo{}, link: map[string]string{}}
}

// Calls returns how many Lstat and Readlink calls the Resolver has made on
// the file system (for tests: what the memo saved is the walks' components
// minus this). 0 for a nil Resolver.
func (rv *Resolver) Calls() int {
	if rv == nil {
		return 0
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.calls
}

// Resolve is [Resolve] through the memo.
func (rv *Resolver) Resolve(p string) (Resolution, error) {
	if err := checkPath(p); err != nil {
		return Resolution{}, err
	}
	if filepath.Separator != '/' {
		return Resolution{}, fmt.Errorf("pathguard: resolve %s: %w", p, errors.ErrUnsupported)
	}
	r, err := walk(rv, p)
	if err != nil {
		return Resolution{}, fmt.Errorf("pathguard: resolve %s: %w", p, err)
	}
	return r, nil
}

// Stat is [os.Stat] of an absolute, clean p through the memo: the
// FileInfo of what p resolves to. A missing p gives an error wrapping
// [fs.ErrNotExist].
func (rv *Resolver) Stat(p string) (fs.FileInfo, error) {
	r, err := rv.Resolve(p)
	if err != nil {
		return nil, err
	}
	if !r.Exists {
		return nil, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	return r.final, nil
}

// Lstat is [os.Lstat] of an absolute, clean p through the memo: what is
// at p itself (a link is not followed), as the memo's snapshot has it.
// Nothing is remembered of a missing p.
func (rv *Resolver) Lstat(p string) (fs.FileInfo, error) {
	if err := checkPath(p); err != nil {
		return nil, err
	}
	return rv.lstat(p)
}

// lstat is os.Lstat through the memo.
func (rv *Resolver) lstat(p string) (fs.FileInfo, error) {
	if rv == nil {
		return os.Lstat(p)
	}
	rv.mu.Lock()
	fi, ok := rv.stat[p]
	rv.mu.Unlock()
	if ok {
		return fi, nil
	}
	fi, err := os.Lstat(p)
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.calls++
	if err == nil {
		rv.stat[p] = fi
	}
	return fi, err
}

// readlink is os.Readlink through the memo.
func (rv *Resolver) readlink(p string) (string, error) {
	if rv == nil {
		return os.Readlink(p)
	}
	rv.mu.Lock()
	t, ok := rv.link[p]
	rv.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := os.Readlink(p)
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.calls++
	if err == nil {
		rv.link[p] = t
	}
	return t, err
}
