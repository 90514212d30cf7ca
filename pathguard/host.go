package pathguard

import (
	"errors"
	"fmt"
)

// ErrNotRegular means a host file sandbox-run was to open exists and is not
// a regular file (a directory, a FIFO, a device, a socket or a symbolic
// link): nothing was opened or written.
var ErrNotRegular = errors.New("pathguard: not a regular file")

// ErrUntrusted means a file or directory of sandbox-run's own state (its
// cache, its run journals) is not what sandbox-run made: another owner than
// the effective uid, writable by group or others, or not of its kind. Its
// content is ignored; a directory is set aside and made again.
var ErrUntrusted = errors.New("pathguard: not owned by this user or writable by others")

// CheckHost refuses p, a file sandbox-run itself opens on the host (a
// report, an audit log, a profile), with an [*EscapeError] of kind
// [KindHost] when any path its walk visited is inside or equal to a
// writable directory, in either spelling, or is the same directory as one:
// the same rule as [Guard.CheckRead]. The sandboxed command could otherwise
// replace the file, or a directory on its way, with a link between runs or
// during one, and sandbox-run would write or read wherever it points.
//
// p must be absolute and clean; Resolve's errors are returned wrapped. A p
// that does not exist is not refused for that. CheckHost only decides; open
// the file with [OpenFile] or write it with [WriteFile], which follow no
// link at all, so that a path outside the writable set changed after the
// check fails rather than leads elsewhere.
func (g *Guard) CheckHost(p string) error {
	r, err := g.rv.Resolve(p)
	if err != nil {
		return fmt.Errorf("pathguard: host file: %w", err)
	}
	if e := g.escape(p, r, KindHost, -1); e != nil {
		return e
	}
	return nil
}
