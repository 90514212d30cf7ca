package sandbox

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/sandbox-run/sandbox-run/pathguard"
)

// A read-only bind does not stop a service from being used: connect() on a
// Unix socket and open() of a FIFO for writing ask for write permission on
// the inode, which a read-only mount does not take away (the kernel checks
// MNT_READONLY only for regular files, directories and links). So a socket
// under a --read path (docker.sock, an ssh-agent, a desktop bus) would hand
// that service to the command. The plan finds every socket and FIFO under a
// --read path before the run and binds /dev/null over each one inside the
// sandbox: the name stays, connect() gets ECONNREFUSED, open() EACCES
// (bwrap's binds are nodev). Nothing is created on the host: the mount
// point is the existing inode.
//
// The search is bounded: scanMaxEntries directory entries and
// scanMaxCovered covered inodes for all --read paths of a run together (a
// path named twice is searched once), and scanMaxDepth levels below each.
// A path over a bound is refused (exit 125), never bound half-checked.
//
// Non-guarantee: a socket or FIFO made under a --read path after the scan
// (while the run is going on) is reachable; so is one in a directory the
// scan could neither list nor would the sandbox's uid search.
const (
	scanMaxEntries = 200_000
	scanMaxDepth   = 64
	scanMaxCovered = 1024
)

// scanLimits bounds the search of one run; the constants above in
// production, small ones in tests. Used counts what earlier --read paths of
// the same run spent of the entries and covered budgets.
type scanLimits struct {
	entries, depth, covered  int
	usedEntries, usedCovered int
}

var defaultScanLimits = scanLimits{entries: scanMaxEntries, depth: scanMaxDepth, covered: scanMaxCovered}

// specialFound is one socket or FIFO found under a --read path.
type specialFound struct {
	rel  string // relative to the scanned root
	kind string // "socket" or "fifo"
}

// scanResult is what one search found and what it cost.
type scanResult struct {
	found   []specialFound
	entries int
	elapsed time.Duration
}

// ScanBoundError means a --read path is too large (or too deep) to be
// searched for sockets within the bounds; the run is refused.
type ScanBoundError struct {
	Path  string
	Bound string // "entries" or "depth" or "covered"
	Limit int
}

func (e *ScanBoundError) Error() string {
	switch e.Bound {
	case "depth":
		return fmt.Sprintf("%s is nested deeper than %d directories", e.Path, e.Limit)
	case "covered":
		return fmt.Sprintf("the --read paths hold more than %d sockets and FIFOs in all (the search stopped in %s)", e.Limit, e.Path)
	}
	return fmt.Sprintf("the --read paths hold more than %d directory entries in all (the search stopped in %s)", e.Limit, e.Path)
}

// scanSpecial searches the tree at root (a real path) for sockets and
// FIFOs with walkTree, whose bounds and rules it shares, and returns each
// one found. A root that is not a directory is returned as found when it
// is a socket or FIFO itself. The root itself is looked up through rv,
// the plan's memo (nil: none).
func scanSpecial(rv *pathguard.Resolver, root string, lim scanLimits) (scanResult, error) {
	return scanSpecialFrom(rv, root, lim, nil)
}

// scanSpecialFrom is scanSpecial from top, root already opened and
// listed (nil: none).
func scanSpecialFrom(rv *pathguard.Resolver, root string, lim scanLimits, top *topListing) (scanResult, error) {
	start := time.Now()
	var res scanResult
	fi, err := rv.Lstat(root)
	if err != nil {
		return res, err
	}
	if k := specialKind(fi.Mode()); k != "" {
		res.found = append(res.found, specialFound{rel: ".", kind: k})
	}
	if fi.IsDir() {
		res.entries, err = walkTree(root, lim, func(rel string, ents dirents) error {
			for _, e := range ents {
				k := specialKind(e.mode)
				if k == "" {
					continue
				}
				if lim.usedCovered+len(res.found) >= lim.covered {
					return &ScanBoundError{Path: root, Bound: "covered", Limit: lim.covered}
				}
				res.found = append(res.found, specialFound{rel: filepath.Join(rel, e.name), kind: k})
			}
			return nil
		}, top)
		if err != nil {
			return res, err
		}
	}
	res.elapsed = time.Since(start)
	return res, nil
}

// specialKind names the file types that a read-only bind still lets the
// command talk through.
func specialKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	}
	return ""
}
