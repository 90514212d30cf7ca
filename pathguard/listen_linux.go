package pathguard

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrInUse means a Unix socket path is being served by someone else.
var ErrInUse = errors.New("pathguard: socket is already being served")

// ListenUnix listens on a Unix socket at p (absolute and clean) without
// following a symbolic link in any component: p's directory is pinned as
// by [OpenFile] and the socket is bound, probed, set to perm and removed
// through that descriptor (/proc/self/fd/N/name), never through p's
// spelling. A socket at p that nobody serves is replaced; one that answers
// gives an error wrapping [ErrInUse]; anything else there (a file, a link)
// an error wrapping [ErrNotRegular], and is left alone. Closing the
// listener removes the socket it made, through the same descriptor.
func ListenUnix(p string, perm os.FileMode) (net.Listener, error) {
	return ListenUnixAs(p, perm, -1, -1)
}

// ListenUnixAs is [ListenUnix] that also gives the socket to uid and gid
// (-1 leaves either as it is), through the same descriptor as the mode, so
// the socket is never reachable by its new owner with another mode. Only
// root may give it to another user; any user may give it to a group of
// its own.
func ListenUnixAs(p string, perm os.FileMode, uid, gid int) (net.Listener, error) {
	dfd, name, err := openParent(p)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(dfd)
		}
	}()
	via := "/proc/self/fd/" + strconv.Itoa(dfd) + "/" + name
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return nil, fmt.Errorf("pathguard: %s exists and is not a socket: %w", p, ErrNotRegular)
		}
		if c, err := net.DialTimeout("unix", via, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("pathguard: %s: %w", p, ErrInUse)
		}
		unix.Unlinkat(dfd, name, 0)
	}
	// Bound under a private name and moved into place once its mode and
	// owner are set, so that nobody who watches p ever finds the socket
	// there with the umask's mode (a client that connected in that window
	// would be refused, or let in, by a mode nobody asked for).
	tmp := fmt.Sprintf(".%s.%d.%d", name, os.Getpid(), time.Now().UnixNano())
	ln, err := net.Listen("unix", "/proc/self/fd/"+strconv.Itoa(dfd)+"/"+tmp)
	if err != nil {
		return nil, &fs.PathError{Op: "listen", Path: p, Err: errors.Unwrap(err)}
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	l := &unixListener{Listener: ln, dfd: dfd, name: tmp}
	ok = true // from here l.Close closes dfd
	if err := l.chmod(p, perm, uid, gid); err != nil {
		l.Close()
		return nil, err
	}
	// RENAME_NOREPLACE: a socket someone else bound at p since the probe
	// above is theirs, never replaced.
	if err := unix.Renameat2(dfd, tmp, dfd, name, unix.RENAME_NOREPLACE); err != nil {
		l.Close()
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("pathguard: %s: %w", p, ErrInUse)
		}
		return nil, &fs.PathError{Op: "rename", Path: p, Err: err}
	}
	l.name = name
	return l, nil
}

// unixListener removes its socket through the pinned directory on Close.
type unixListener struct {
	net.Listener
	dfd  int
	name string
	once sync.Once
}

// chmod sets perm on the socket just bound, opened O_PATH|O_NOFOLLOW in the
// pinned directory (a link swapped in is not followed) and changed through
// its descriptor.
func (l *unixListener) chmod(p string, perm os.FileMode, uid, gid int) error {
	fd, err := unix.Openat(l.dfd, l.name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("pathguard: %s changed after it was bound: %w", p, ErrChanged)
	}
	via := "/proc/self/fd/" + strconv.Itoa(fd)
	// The mode first: until the owner changes, only this user reaches it.
	if err := unix.Chmod(via, uint32(perm.Perm())); err != nil {
		return &fs.PathError{Op: "chmod", Path: p, Err: err}
	}
	if uid >= 0 || gid >= 0 {
		if err := unix.Chown(via, uid, gid); err != nil {
			return &fs.PathError{Op: "chown", Path: p, Err: err}
		}
	}
	return nil
}

// Close stops listening, removes the socket and releases the directory.
func (l *unixListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() {
		unix.Unlinkat(l.dfd, l.name, 0)
		unix.Close(l.dfd)
	})
	return err
}
