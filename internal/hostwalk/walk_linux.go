package hostwalk

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/gitrepo"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
	"golang.org/x/sys/unix"
)

// GitFinds is what FindGit found: git directories and common directories
// inside the writable directories (every repository git's own rules find
// at any directory of the walk, see gitrepo.At, and every directory named
// .git), and .git files and links. It is a snapshot of the walk's moment;
// Report says whether the walk was complete (when not, what lies beyond
// is unknown, not absent).
type GitFinds struct {
	Dirs  []string // sorted, each once
	Files []string // sorted
	Links []string // .git entries that are symbolic links
	// Tops are the listings of the walk's starting directories (those of
	// at most kindsBound entries), for Kinds to answer from (Kinds.Seed).
	Tops   map[string]Dirents
	Report report.WalkReport
	seen   map[string]bool
	more   int // reasons past maxSkipped
}

// FindGit walks every writable directory, breadth first, without following
// links (a directory is listed, never a link to one), within b, and at
// every directory it lists applies git's discovery rules (gitrepo.At): a .git
// directory or "gitdir:" file resolved as git resolves it (links and ".."
// in the path included, whatever lies on the way), a directory that git
// takes for a git directory (a HEAD that is a link to refs/... counts), and
// the common directory a commondir file names. What it finds inside the
// writable directories is kept. It walks into git directories too (a
// repository made inside another, or inside what merely looks like one, is
// found), but for git's own parts (gitPart), and reads entry types from
// getdents, so its cost is one getdents per directory plus a few reads
// per candidate.
//
// Every directory a host git may use for a command-written repository is
// so found: git reads config and hooks from a git directory or its common
// directory, and each one inside a writable directory is a directory this
// walk lists and tests; one outside is not the command's to write. gitDirs
// gives the same answer for one starting directory.
func FindGit(writable []string, b Bounds) *GitFinds {
	return FindGitFrom(writable, b, nil)
}

// FindGitFrom is FindGit with the writable directories' listings that
// tops holds (the plan's, shared with the socket scan) taken from there
// instead of listed again.
func FindGitFrom(writable []string, b Bounds, tops Tops) *GitFinds {
	b = b.OrDefault()
	g := &GitFinds{seen: map[string]bool{}}
	start := time.Now()
	type item struct {
		path  string
		depth int
	}
	var queue []item
	for _, w := range writable {
		queue = append(queue, item{w, 0})
	}
	var l Lister
	g.Report.Complete = true
	for i := 0; i < len(queue); i++ {
		it := queue[i]
		left := b.Entries - g.Report.Entries
		if left <= 0 {
			rest := make([]string, 0, 3)
			for _, q := range queue[i:min(i+3, len(queue))] {
				rest = append(rest, q.path)
			}
			g.incomplete(fmt.Sprintf("%d directories not walked (%s ...): the walk stopped after %d entries (bound %d)",
				len(queue)-i, strings.Join(rest, ", "), g.Report.Entries, b.Entries))
			break
		}
		names, ok := g.list(&l, tops, it.path, it.depth, left, b)
		if !ok {
			continue
		}
		own := filepath.Base(it.path) == ".git"
		for _, r := range gitrepo.At(it.path, names.Get) {
			g.addRepo(r, writable)
			own = own || r.Dir == it.path || r.Common == it.path
		}
		for _, e := range names {
			if e.Name == ".git" {
				g.dotGit(filepath.Join(it.path, e.Name), e.Mode, writable)
			}
			if !e.Mode.IsDir() || own && gitPart(e.Name) {
				continue // most entries: nothing to join or do
			}
			p := filepath.Join(it.path, e.Name)
			if it.depth+1 < b.Depth {
				queue = append(queue, item{p, it.depth + 1})
				continue
			}
			g.incomplete(p + ": deeper than " + fmt.Sprint(b.Depth) + " levels")
		}
	}
	if g.more > 0 {
		g.Report.Skipped = append(g.Report.Skipped, fmt.Sprintf("and %d more", g.more))
	}
	sort.Strings(g.Dirs)
	sort.Strings(g.Files)
	g.Report.GitDirs = len(g.Dirs)
	g.Report.Micros = time.Since(start).Microseconds()
	return g
}

// list is FindGit's listing of dir (at depth, within left entries of
// b): from tops for a writable dir listed there, else by l. ok is false
// when there is nothing to walk: over the bound or unreadable (recorded
// as incomplete), or gone.
func (g *GitFinds) list(l *Lister, tops Tops, dir string, depth, left int, b Bounds) (Dirents, bool) {
	names, err := tops.names(dir, depth, left)
	if names == nil && err == nil {
		names, err = l.readNamesMax(dir, left)
	}
	if errors.Is(err, errTooMany) {
		g.incomplete(fmt.Sprintf("%s: not walked, more entries than the %d left of the bound (%d)", dir, left, b.Entries))
		g.Report.Entries = b.Entries
		return nil, false
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		// Gone, or no longer a directory (a writable dir removed
		// since its run): nothing there for git to read.
		return nil, false
	}
	if err != nil {
		g.incomplete(dir + ": " + fault.Reason(err))
		return nil, false
	}
	g.Report.Dirs++
	g.Report.Entries += len(names)
	if depth == 0 && len(names) <= kindsBound {
		if g.Tops == nil {
			g.Tops = map[string]Dirents{}
		}
		g.Tops[dir] = slices.Clone(names) // l reuses names' array
	}
	return names, true
}

// gitPart says whether name, in a git directory, is one of the parts
// where git keeps its objects, refs, logs, hooks and info, and no git
// directory: the walk does not list them (a repository with loose objects
// has up to 257 directories in objects alone). A repository hidden there
// is reached only by a user who goes into it; every other name in a git
// directory (modules, worktrees, anything the command added) is walked.
func gitPart(name string) bool {
	switch name {
	case "objects", "refs", "logs", "hooks", "info", "branches", "rr-cache", "lfs":
		return true
	}
	return false
}

// incomplete records that the walk left something out, and why: the
// first maxSkipped reasons, then how many more (a tree 65 levels deep
// would otherwise fill the report with one line per directory).
func (g *GitFinds) incomplete(why string) {
	g.Report.Complete = false
	if len(g.Report.Skipped) < maxSkipped {
		g.Report.Skipped = append(g.Report.Skipped, why)
		return
	}
	g.more++
}

// maxSkipped bounds the reasons a walk report lists.
const maxSkipped = 20

// add records a git or common directory once.
func (g *GitFinds) add(d string) {
	if !g.seen[d] {
		g.seen[d] = true
		g.Dirs = append(g.Dirs, d)
	}
}

// addRepo records r's git and common directory, those inside writable.
func (g *GitFinds) addRepo(r gitrepo.Repo, writable []string) {
	for _, d := range []string{r.Dir, r.Common} {
		if policy.InsideAny(d, writable) {
			g.add(d)
		}
	}
}

// dotGit records an entry named .git by its type: a directory is held
// whether or not git would take it (the command could complete it), a
// file is held (it names where git looks), a link is refused at start
// and quarantined after the run.
func (g *GitFinds) dotGit(p string, mode fs.FileMode, writable []string) {
	switch {
	case mode.IsDir():
		if policy.InsideAny(p, writable) {
			g.add(p)
		}
	case mode&fs.ModeSymlink != 0:
		g.Links = append(g.Links, p)
	case mode.IsRegular():
		g.Files = append(g.Files, p)
	}
}

// TopListing is a writable directory opened (O_RDONLY|O_DIRECTORY|
// O_NOFOLLOW, as the walks open it) and listed once for the plan's walks:
// the git walk (FindGitFrom) and the socket scan (ScanSpecialFrom) both
// start from it, so both see the same snapshot of it. A failed open or
// listing is kept, and each walk then opens and lists the directory
// itself (and reports its own error).
type TopListing struct {
	fd   int
	ents Dirents
	err  error // the open or the listing failed: each walk looks itself
}

// Tops are a plan's TopListings, by path. The holder calls Close once
// every walk that uses them has returned.
type Tops map[string]*TopListing

// ListTops opens and lists each of dirs, up to bound entries each (one
// over the bound keeps errTooMany, and its walks list it themselves). It
// never follows a link at a dir's last component; the descriptors are
// close-on-exec and stay open until Close.
func ListTops(dirs []string, bound int) Tops {
	tops := Tops{}
	var l Lister
	for _, d := range dirs {
		t := &TopListing{fd: -1}
		tops[d] = t
		fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			t.err = err
			continue
		}
		t.fd = fd
		ents, err := l.List(fd, bound)
		t.ents, t.err = append(Dirents{}, ents...), err // not nil: listed, if empty
	}
	return tops
}

// Close closes every top's descriptor; the listings stay readable.
func (tops Tops) Close() {
	for _, t := range tops {
		if t.fd >= 0 {
			unix.Close(t.fd)
		}
	}
}

// names is the listing of dir when it is a top (depth 0) listed within
// left entries; nil, nil otherwise (the walk lists it itself, with its
// own errors).
func (tops Tops) names(dir string, depth, left int) (Dirents, error) {
	t := tops[dir]
	if depth != 0 || t == nil || t.err != nil || len(t.ents) > left {
		return nil, nil
	}
	return t.ents, nil
}

// ReadNames lists a directory's entries with their types (from getdents:
// no stat per entry), without following a link at its last component.
// It is unbounded: a caller that lists a directory the command could
// fill bounds it itself (FindGit does). The listing is the caller's.
func ReadNames(dir string) (Dirents, error) {
	var l Lister
	return l.readNames(dir)
}

// readNames is ReadNames with l's buffer.
func (l *Lister) readNames(dir string) (Dirents, error) {
	return l.readNamesMax(dir, 0)
}

// readNamesMax is readNames that stops with errTooMany past max entries
// (0: no bound).
func (l *Lister) readNamesMax(dir string, max int) (Dirents, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	ents, err := l.List(fd, max)
	if errors.Is(err, errTooMany) {
		return nil, err
	}
	if err != nil {
		return nil, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
	}
	return ents, nil
}
