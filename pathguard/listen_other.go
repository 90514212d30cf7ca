//go:build !linux

package pathguard

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// ErrInUse means a Unix socket path is being served by someone else.
var ErrInUse = errors.New("pathguard: socket is already being served")

// ListenUnix listens on a Unix socket at p, refusing a link in any
// component and replacing only a stale socket. Outside Linux the check
// races with the bind and the chmod (see [OpenFile]).
func ListenUnix(p string, perm os.FileMode) (net.Listener, error) {
	return ListenUnixAs(p, perm, -1, -1)
}

// ListenUnixAs is [ListenUnix] that also gives the socket to uid and gid
// (-1 leaves either as it is). Outside Linux the chown races too.
func ListenUnixAs(p string, perm os.FileMode, uid, gid int) (net.Listener, error) {
	r, err := Resolve(p)
	if err != nil {
		return nil, err
	}
	if r.Path != p {
		return nil, fmt.Errorf("pathguard: %s follows a symbolic link: %w", p, ErrNotRegular)
	}
	if r.Exists {
		if r.final.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("pathguard: %s exists and is not a socket: %w", p, ErrNotRegular)
		}
		if c, err := net.DialTimeout("unix", p, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("pathguard: %s: %w", p, ErrInUse)
		}
		os.Remove(p)
	}
	ln, err := net.Listen("unix", p)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(p, perm); err != nil {
		ln.Close()
		return nil, err
	}
	if uid >= 0 || gid >= 0 {
		if err := os.Lchown(p, uid, gid); err != nil {
			ln.Close()
			return nil, err
		}
	}
	return ln, nil
}
