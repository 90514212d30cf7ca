//go:build !linux

package pathguard

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// OpenFile opens the host file p (absolute and clean) with flag, refusing
// a symbolic link in any component and an existing p that is not a regular
// file (an error wrapping [ErrNotRegular]). Outside Linux the components
// are checked with Lstat before the open, so a link planted between the
// check and the open is followed: the race that Linux closes with openat2
// stays open here.
func OpenFile(p string, flag int, perm os.FileMode) (*os.File, error) {
	if err := noLinks(p); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, flag, perm)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("pathguard: %s: %w", p, ErrNotRegular)
	}
	return f, nil
}

// WriteFile replaces the host file p with data through a new file renamed
// over it, refusing a link in any component and an existing p that is not
// a regular file. Outside Linux the check races with the write (see
// [OpenFile]).
func WriteFile(p string, data []byte, perm os.FileMode) error {
	if err := noLinks(p); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), perm)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), p)
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}

// RemoveIfSame removes p if it is still the empty file f has open.
func RemoveIfSame(p string, f *os.File) error {
	if err := noLinks(p); err != nil {
		return err
	}
	at, err := os.Lstat(p)
	if err != nil {
		return err
	}
	open, err := f.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(at, open) || at.Size() != 0 {
		return fmt.Errorf("pathguard: remove %s: %w", p, ErrChanged)
	}
	return os.Remove(p)
}

// noLinks refuses a p that is not absolute and clean, that has a symbolic
// link in a component, or that exists and is not a regular file.
func noLinks(p string) error {
	if err := checkPath(p); err != nil {
		return err
	}
	r, err := Resolve(p)
	if err != nil {
		return err
	}
	for _, s := range r.steps {
		if s.kind == stepLink {
			return &fs.PathError{Op: "open", Path: p, Err: fmt.Errorf("symbolic link %s on the way: %w", s.path, ErrNotRegular)}
		}
	}
	if r.Exists && !r.final.Mode().IsRegular() {
		return fmt.Errorf("pathguard: %s exists and is not a regular file: %w", p, ErrNotRegular)
	}
	return nil
}
