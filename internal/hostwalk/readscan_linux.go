package hostwalk

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

// ScanLimits bounds the search of one run; the constants above in
// production, small ones in tests. Used counts what earlier --read paths of
// the same run spent of the entries and covered budgets.
type ScanLimits struct {
	Entries, Depth, Covered  int
	UsedEntries, UsedCovered int
}

// DefaultScanLimits are the production bounds of a run's socket search:
// scanMaxEntries entries, scanMaxDepth levels, scanMaxCovered found.
func DefaultScanLimits() ScanLimits {
	return ScanLimits{Entries: scanMaxEntries, Depth: scanMaxDepth, Covered: scanMaxCovered}
}

// SpecialFound is one socket or FIFO found under a --read path.
type SpecialFound struct {
	Rel  string // relative to the scanned root
	Kind string // "socket" or "fifo"
}

// ScanResult is what one search found and what it cost.
type ScanResult struct {
	Found   []SpecialFound
	Entries int // directory entries read
	Elapsed time.Duration
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

// ScanSpecial searches the tree at root (a real path) for sockets and
// FIFOs with walkTree, whose bounds and rules it shares, and returns each
// one found. A root that is not a directory is returned as found when it
// is a socket or FIFO itself. The root itself is looked up through rv,
// the plan's memo (nil: none).
func ScanSpecial(rv *pathguard.Resolver, root string, lim ScanLimits) (ScanResult, error) {
	return ScanSpecialFrom(rv, root, lim, nil)
}

// ScanSpecialFrom is ScanSpecial from top, root already opened and
// listed (nil: none).
func ScanSpecialFrom(rv *pathguard.Resolver, root string, lim ScanLimits, top *TopListing) (ScanResult, error) {
	start := time.Now()
	var res ScanResult
	fi, err := rv.Lstat(root)
	if err != nil {
		return res, err
	}
	if k := specialKind(fi.Mode()); k != "" {
		res.Found = append(res.Found, SpecialFound{Rel: ".", Kind: k})
	}
	if fi.IsDir() {
		res.Entries, err = walkTree(root, lim, func(rel string, ents Dirents) error {
			for _, e := range ents {
				k := specialKind(e.Mode)
				if k == "" {
					continue
				}
				if lim.UsedCovered+len(res.Found) >= lim.Covered {
					return &ScanBoundError{Path: root, Bound: "covered", Limit: lim.Covered}
				}
				res.Found = append(res.Found, SpecialFound{Rel: filepath.Join(rel, e.Name), Kind: k})
			}
			return nil
		}, top)
		if err != nil {
			return res, err
		}
	}
	res.Elapsed = time.Since(start)
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
