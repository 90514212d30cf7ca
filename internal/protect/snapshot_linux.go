package protect

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/report"
)

// A mechanism that cannot hold an existing protected path read-only
// (Landlock: its grants are additive beneath a writable directory) keeps
// a snapshot of it instead. The path stays writable while the run lasts
// (the live window); when the journal is neutralised, once no live run
// shares the directory, whatever differs from the snapshot is quarantined
// and the snapshot is put back in its place.
//
// Guarantees: after the settle every snapshotted path has the type,
// permission bits, contents and link targets it had at the run's start,
// or the report's quarantined list says why it could not be put back and
// where the start copy is kept. Nothing is followed through a link in the
// writable directory. Non-guarantees: a host tool that runs in the
// directory during the run sees what the command wrote; a change made on
// the host while the run lasts is quarantined like the command's; owners
// are kept only when sandbox-run runs as root; extended attributes,
// hard-link identities, sockets, FIFOs and devices are not kept (the
// start walk refuses sockets and FIFOs in writable directories).

// HeldCopy names a snapshotted path and its copy, in a run's journal and
// its State.
type HeldCopy struct {
	Path string `json:"path"`
	Copy string `json:"copy"`
	// Taken is when the copy was made (Unix nanoseconds): of runs that
	// overlapped, a later one copied what an earlier one's command may
	// already have changed, so only the earliest copy is put back.
	Taken int64 `json:"taken"`
}

// earliestCopies returns, per snapshotted path of js (journals settled
// together), when its earliest copy was taken.
func earliestCopies(js []*journal) map[string]int64 {
	out := map[string]int64{}
	for _, j := range js {
		for _, h := range j.Held {
			if t, ok := out[h.Path]; !ok || h.Taken < t {
				out[h.Path] = h.Taken
			}
		}
	}
	return out
}

// Bounds of one run's snapshots: a protected path past them cannot be
// kept, and the run is refused (ErrSnapBounds). SnapMaxEntries counts
// every file, directory and link copied, the paths themselves included.
const (
	SnapMaxEntries = 4096
	snapMaxBytes   = 64 << 20
)

// ErrSnapBounds is wrapped by Snapshot's error when a protected path
// passes the snapshot bounds (4,096 entries, 64 MiB): the run is refused.
var ErrSnapBounds = errors.New("sandbox: protected path too large to snapshot")

// SnapshotDir makes and returns where run runID keeps its snapshots: a
// private directory in the cache (made without following a link, this
// user's, closed to others), or, without a cache, a new temporary
// directory. Removing it is the caller's when the run is refused.
func SnapshotDir(cache, runID string) (string, error) {
	if cache == "" {
		return os.MkdirTemp("", "sandbox-run-snapshot-")
	}
	dir := filepath.Join(cache, "snapshots", runID)
	d, err := pathguard.OpenPrivateDir(dir)
	if err != nil {
		return "", err
	}
	d.Close()
	return dir, nil
}

// Snapshot copies each of paths (existing files and directories below the
// writable directories, none of them a link: the layout refused those)
// into dir, within the bounds (past them: ErrSnapBounds), keeping type,
// permission bits, contents, link targets and, as root, owners. On an
// error the copies made so far are returned with it.
func Snapshot(dir string, paths []string) ([]HeldCopy, error) {
	b := &snapBudget{entries: SnapMaxEntries, bytes: snapMaxBytes}
	out := make([]HeldCopy, 0, len(paths))
	for _, p := range paths {
		cp := filepath.Join(dir, strings.TrimPrefix(p, "/"))
		if err := os.MkdirAll(filepath.Dir(cp), 0o700); err != nil {
			return out, err
		}
		if err := copyKeep(p, cp, b); err != nil {
			return out, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, HeldCopy{Path: p, Copy: cp, Taken: time.Now().UnixNano()})
	}
	return out, nil
}

// snapBudget is what a snapshot may still copy.
type snapBudget struct{ entries, bytes int64 }

func (b *snapBudget) take(size int64) error {
	b.entries--
	b.bytes -= size
	if b.entries < 0 || b.bytes < 0 {
		return fmt.Errorf("%w (bounds: %d entries, %d MiB)", ErrSnapBounds, SnapMaxEntries, snapMaxBytes>>20)
	}
	return nil
}

// copyKeep copies src to dst (which must not exist), keeping the type,
// the permission bits, the contents, link targets and, as root, the
// owners. Links are copied as links, never followed; other kinds of file
// are left out.
func copyKeep(src, dst string, b *snapBudget) error {
	var st unix.Stat_t
	if err := unix.Lstat(src, &st); err != nil {
		return err
	}
	if err := b.take(st.Size); err != nil {
		return err
	}
	mode := st.Mode & 0o7777
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		t, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.Symlink(t, dst); err != nil {
			return err
		}
	case unix.S_IFDIR:
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		names, err := hostwalk.ReadNames(src)
		if err != nil {
			return err
		}
		for _, e := range names {
			if err := copyKeep(filepath.Join(src, e.Name), filepath.Join(dst, e.Name), b); err != nil {
				return err
			}
		}
		if err := os.Chmod(dst, os.FileMode(mode&0o777)); err != nil {
			return err
		}
	case unix.S_IFREG:
		if err := copyFile(src, dst, mode); err != nil {
			return err
		}
	default:
		return nil
	}
	if os.Geteuid() == 0 {
		return os.Lchown(dst, int(st.Uid), int(st.Gid))
	}
	return nil
}

// copyFile copies a regular file's contents, opened without following a
// link or blocking on a FIFO swapped in, to a new file with mode.
func copyFile(src, dst string, mode uint32) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, io.LimitReader(in, snapMaxBytes))
	if err == nil {
		err = out.Chmod(os.FileMode(mode & 0o777))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// sameTree says whether a and b hold the same tree: type, permission
// bits, contents and link targets, within the snapshot bounds (past them
// the trees count as different).
func sameTree(a, b string, left *int) bool {
	if *left--; *left < 0 {
		return false
	}
	var sa, sb unix.Stat_t
	if unix.Lstat(a, &sa) != nil || unix.Lstat(b, &sb) != nil {
		return false
	}
	if sa.Mode&unix.S_IFMT != sb.Mode&unix.S_IFMT || sa.Mode&0o777 != sb.Mode&0o777 {
		return false
	}
	switch sa.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		ta, ea := os.Readlink(a)
		tb, eb := os.Readlink(b)
		return ea == nil && eb == nil && ta == tb
	case unix.S_IFREG:
		return sa.Size == sb.Size && sa.Size <= snapMaxBytes && sameContents(a, b)
	case unix.S_IFDIR:
		na, ea := hostwalk.ReadNames(a)
		nb, eb := hostwalk.ReadNames(b)
		if ea != nil || eb != nil || len(na) != len(nb) {
			return false
		}
		for i := range na {
			if na[i].Name != nb[i].Name || !sameTree(filepath.Join(a, na[i].Name), filepath.Join(b, nb[i].Name), left) {
				return false
			}
		}
		return true
	}
	return false
}

func sameContents(a, b string) bool {
	read := func(p string) ([]byte, error) {
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(io.LimitReader(f, snapMaxBytes+1))
	}
	ba, ea := read(a)
	bb, eb := read(b)
	return ea == nil && eb == nil && bytes.Equal(ba, bb)
}

// restoreHeld puts back every snapshotted path of j that differs from its
// snapshot: what is there now is quarantined first, then the copy is
// made in its place, beneath the parent held by a descriptor. The
// snapshot directory is removed when every path was settled; otherwise
// it stays, and the quarantined entry names the copy to take back.
func (q *quarantine) restoreHeld(j *journal) {
	kept := false
	for _, h := range j.Held {
		w := owner(h.Path, j.Writable)
		if w == "" {
			continue
		}
		if t, ok := q.earliest[h.Path]; ok && h.Taken > t {
			continue // an earlier run's copy, settled alongside, is the one put back
		}
		left := SnapMaxEntries
		if sameTree(h.Path, h.Copy, &left) {
			continue
		}
		why := "changed during the run where --sandbox landlock could not hold it read-only; the copy from the run's start is put back"
		n := len(q.items)
		q.moveAt(w, h.Path, why)
		if len(q.items) == n {
			// Nothing was there to move: the command removed it.
			q.items = append(q.items, report.Quarantined{Path: h.Path, Run: q.run,
				Why: "removed during the run where --sandbox landlock could not hold it; the copy from the run's start is put back"})
		} else if q.items[n].To == "" {
			kept = true // the move failed: the item says why; nothing is put back over it
			q.items[n].To = h.Copy
			continue
		}
		if err := putBack(w, h); err != nil {
			kept = true
			q.items = append(q.items, report.Quarantined{Path: h.Path, To: h.Copy, Run: q.run,
				Why: "could not be put back from the copy taken at the run's start (" + fault.Reason(err) + "); the copy is kept"})
		}
	}
	if !kept && j.SnapshotDir != "" {
		os.RemoveAll(j.SnapshotDir)
	}
}

// putBack copies h's snapshot to h.Path, which must not exist, inside its
// parent directory opened from w without following a link.
func putBack(w string, h HeldCopy) error {
	parent, name, err := openParent(w, h.Path)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	b := &snapBudget{entries: SnapMaxEntries, bytes: snapMaxBytes}
	return copyKeep(h.Copy, fmt.Sprintf("/proc/self/fd/%d/%s", parent, name), b)
}
