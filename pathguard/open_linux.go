package pathguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Open opens r.Path with O_PATH|O_NOFOLLOW|O_CLOEXEC, refusing to follow any
// symbolic link on the way (openat2 with RESOLVE_NO_SYMLINKS and
// RESOLVE_NO_MAGICLINKS; on kernels or seccomp profiles without openat2, an
// openat walk that opens each directory O_PATH|O_NOFOLLOW|O_DIRECTORY), and
// verifies with fstat that the descriptor is the inode the walk checked
// (same device, inode and file type). Pass the file to bwrap for
// --ro-bind-fd or --bind-fd: the mount is then the checked inode, whatever
// happens to the path afterwards. The caller owns the file and must close
// it; it is close-on-exec, so hand it to the child through
// exec.Cmd.ExtraFiles.
//
// Errors: fs.ErrNotExist if r.Exists is false; fs.ErrInvalid if r did not
// come from Resolve; ErrChanged if the path now holds another inode, and an
// error wrapping ELOOP or ENOTDIR if a link was planted on it since the walk.
func (r Resolution) Open() (*os.File, error) {
	if !r.Exists {
		return nil, fmt.Errorf("pathguard: open %s: %w", r.Path, fs.ErrNotExist)
	}
	want, ok := statOf(r.final)
	if !ok || checkPath(r.Path) != nil {
		return nil, fmt.Errorf("pathguard: open %s: resolution not produced by Resolve: %w", r.Path, fs.ErrInvalid)
	}
	fd, err := openNoSymlinks(r.Path, 0)
	if err != nil {
		return nil, fmt.Errorf("pathguard: open %s: %w", r.Path, err)
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pathguard: open %s: fstat: %w", r.Path, err)
	}
	if uint64(got.Dev) != uint64(want.Dev) || got.Ino != want.Ino || got.Mode&unix.S_IFMT != want.Mode&unix.S_IFMT {
		unix.Close(fd)
		return nil, fmt.Errorf("pathguard: open %s: inode %d:%d, checked %d:%d: %w",
			r.Path, got.Dev, got.Ino, want.Dev, want.Ino, ErrChanged)
	}
	return os.NewFile(uintptr(fd), r.Path), nil
}

func statOf(fi fs.FileInfo) (*syscall.Stat_t, bool) {
	if fi == nil {
		return nil, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return st, ok
}

const pathFlags = unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC

// openNoSymlinks opens the absolute, clean path p as O_PATH (plus extra,
// such as O_DIRECTORY) without following any symbolic link, including one
// at the end.
func openNoSymlinks(p string, extra int) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   uint64(pathFlags | extra),
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	// ENOSYS: kernel before 5.6. EPERM: a seccomp profile that predates
	// openat2 (older container runtimes). Both mean "no openat2", not
	// "refused"; the walk below gives the same guarantee.
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return openWalk(p, extra)
	}
	if err != nil {
		return -1, &fs.PathError{Op: "openat2", Path: p, Err: err}
	}
	return fd, nil
}

// openWalk opens p one component at a time from /, each directory with
// O_PATH|O_NOFOLLOW|O_DIRECTORY (a link there fails with ENOTDIR or ELOOP)
// and the last component with O_PATH|O_NOFOLLOW|extra (a link there is
// opened as the link itself, which the caller's inode check rejects, or
// fails with ENOTDIR when extra holds O_DIRECTORY).
func openWalk(p string, extra int) (int, error) {
	dir, err := unix.Open("/", pathFlags|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: "/", Err: err}
	}
	rest := strings.TrimPrefix(p, "/")
	for rest != "" {
		name, tail, more := strings.Cut(rest, "/")
		flags := pathFlags | extra
		if more {
			flags |= unix.O_DIRECTORY
		}
		fd, err := unix.Openat(dir, name, flags, 0)
		unix.Close(dir)
		if err != nil {
			return -1, &fs.PathError{Op: "openat", Path: p, Err: err}
		}
		dir, rest = fd, tail
	}
	return dir, nil
}
