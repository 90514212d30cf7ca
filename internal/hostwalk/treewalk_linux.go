package hostwalk

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// treeVisitor is shown each directory walkTree lists: rel is its path below
// the root ("" for the root itself) and ents all its entries, each with the
// type getdents gave (no stat, no link followed). An error stops the walk
// and is returned as is. A visitor must not keep ents past the call.
type treeVisitor func(rel string, ents Dirents) error

// walkTree walks the directory tree at root (a real path: no link on the
// way, as pathguard resolved it), depth first, and shows every directory
// to visit. It never follows a link: each directory is opened through its
// parent's descriptor with O_NOFOLLOW|O_DIRECTORY, so no path is resolved
// twice and a directory swapped for a link during the walk is skipped. It
// crosses mount points, as bwrap's recursive bind does.
//
// Bounds: lim.Entries directory entries (with lim.UsedEntries already spent
// by earlier walks of the run) and lim.Depth levels below root; over one it
// stops with a *ScanBoundError. A directory it cannot list is skipped when
// the caller cannot search it either; one the caller could search but not
// list stops the walk with an error, since a file at a known name in it
// would be reachable. It returns the number of entries it read.
//
// The one walk serves every search of a tree a run makes: the socket
// search of --read paths and writable dirs is a visitor (ScanSpecial);
// another search (git directories) can be a second visitor of the same
// walk, which then costs one getdents pass for both.
//
// top, when set, is root already opened and listed (a tops entry of the
// plan): its descriptor and listing are used instead of opening and
// listing root again.
func walkTree(root string, lim ScanLimits, visit treeVisitor, top *TopListing) (int, error) {
	w := walker{root: root, lim: lim, visit: visit}
	if top != nil && top.err == nil {
		err := w.dir(top.fd, "", 1, top.ents)
		return w.entries, err
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	err = w.dir(fd, "", 1, nil)
	return w.entries, err
}

type walker struct {
	root    string
	lim     ScanLimits
	visit   treeVisitor
	entries int
	l       Lister
}

// dir reads the directory open at fd (the caller closes fd), shows it to
// the visitor, and descends into its subdirectories. pre, when not nil,
// is the directory's listing already made (walkTree's top): it is not
// listed again, and is bounded as a listing of its own would be.
func (w *walker) dir(fd int, rel string, depth int, pre Dirents) error {
	if depth > w.lim.Depth {
		return &ScanBoundError{Path: w.root, Bound: "depth", Limit: w.lim.Depth}
	}
	left := w.lim.Entries - w.lim.UsedEntries - w.entries
	if left < 1 {
		left = 1 // any entry at all is over the bound
	}
	all, err := pre, error(nil)
	if pre == nil {
		all, err = w.l.List(fd, left)
	} else if len(pre) > left {
		err = errTooMany
	}
	if errors.Is(err, errTooMany) {
		return &ScanBoundError{Path: w.root, Bound: "entries", Limit: w.lim.Entries}
	}
	if err != nil {
		return fmt.Errorf("cannot list %s: %w", filepath.Join(w.root, rel), err)
	}
	w.entries += len(all)
	if w.lim.UsedEntries+w.entries > w.lim.Entries {
		return &ScanBoundError{Path: w.root, Bound: "entries", Limit: w.lim.Entries}
	}
	if err := w.visit(rel, all); err != nil {
		return err
	}
	// The next listing reuses all's entries: keep the subdirectories'
	// names (strings, which stay valid) before descending.
	var subs []string
	for _, e := range all {
		if e.Mode.IsDir() {
			subs = append(subs, e.Name)
		}
	}
	for _, name := range subs {
		if err := w.sub(fd, name, filepath.Join(rel, name), depth); err != nil {
			return err
		}
	}
	return nil
}

// sub opens the subdirectory name of the directory at parent and walks
// it. A directory that vanished or became something else since it was
// listed is skipped: what is there now is no directory to descend into.
func (w *walker) sub(parent int, name, rel string, depth int) error {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case err == nil:
		defer unix.Close(fd)
		return w.dir(fd, rel, depth+1, nil)
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		return nil
	case errors.Is(err, unix.EACCES):
		// Unlistable. If it cannot be searched either, nothing in it
		// can be reached by name; otherwise a socket at a guessed name
		// could be.
		if unix.Faccessat(parent, name, unix.X_OK, unix.AT_EACCESS) != nil {
			return nil
		}
		return fmt.Errorf("cannot list %s, which is searchable, so a socket in it could be reached by its name", filepath.Join(w.root, rel))
	}
	return fmt.Errorf("cannot open %s: %w", filepath.Join(w.root, rel), err)
}
