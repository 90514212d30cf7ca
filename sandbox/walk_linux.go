package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of the walk that finds git directories in the writable
// directories. A workdir of 20,000 files walks in well under these; past
// them the walk stops and says so in the report (a repository beyond them
// is not held).
const (
	walkMaxEntries = 200_000
	walkMaxTime    = 2 * time.Second
	walkMaxDepth   = 64
)

// gitFinds is what a walk found: git directories (a .git directory, a
// bare repository, a submodule's or worktree's directory inside one, a
// gitdir:/commondir target inside a writable directory, or a writable
// directory that is a git directory itself) and .git files.
type gitFinds struct {
	dirs   []string
	files  []string
	links  []string // .git entries that are symbolic links
	report WalkReport
}

// isGitDir says, from a directory's entry names, whether git would take it
// for a git directory: HEAD, objects and refs.
func isGitDir(names dirents) bool {
	h, ok1 := names.get("HEAD")
	o, ok2 := names.get("objects")
	r, ok3 := names.get("refs")
	return ok1 && ok2 && ok3 && h.IsRegular() && o.IsDir() && r.IsDir()
}

// findGit walks every writable directory, breadth first, without following
// links, for git directories and .git files, within the walk bounds. It
// reads directory entries only (their type comes with them), so its cost is
// one getdents per directory.
func findGit(writable []string) *gitFinds {
	g := &gitFinds{}
	start := time.Now()
	type item struct {
		path  string
		depth int
	}
	var queue []item
	for _, w := range writable {
		queue = append(queue, item{w, 0})
	}
	seen := map[string]bool{}
	var l lister
	addDir := func(d string) {
		if !seen[d] {
			seen[d] = true
			g.dirs = append(g.dirs, d)
		}
	}
	g.report.Complete = true
	for i := 0; i < len(queue); i++ {
		it := queue[i]
		if g.report.Entries > walkMaxEntries || time.Since(start) > walkMaxTime {
			g.report.Complete = false
			g.report.Skipped = append(g.report.Skipped, fmt.Sprintf("%d directories not walked: the walk stopped after %d entries in %s (bounds %d entries, %s)",
				len(queue)-i, g.report.Entries, time.Since(start).Round(time.Millisecond), walkMaxEntries, walkMaxTime))
			break
		}
		names, err := l.readNames(it.path)
		if err != nil {
			g.report.Complete = false
			g.report.Skipped = append(g.report.Skipped, it.path+": "+errText(err))
			continue
		}
		g.report.Dirs++
		g.report.Entries += len(names)
		if isGitDir(names) {
			// A bare repository, or a writable dir that is a .git (--write
			// /main/.git of a worktree): git's own parts are not walked.
			addDir(it.path)
			g.gitDirInside(it.path, names, addDir)
			continue
		}
		for _, e := range names {
			name, mode := e.name, e.mode
			switch {
			case name == ".git":
				g.dotGit(filepath.Join(it.path, name), mode, addDir)
				continue
			case !mode.IsDir():
				continue // most entries: nothing to join or do
			}
			p := filepath.Join(it.path, name)
			if it.depth+1 < walkMaxDepth {
				queue = append(queue, item{p, it.depth + 1})
				continue
			}
			g.report.Complete = false
			g.report.Skipped = append(g.report.Skipped, p+": deeper than "+fmt.Sprint(walkMaxDepth)+" levels")
		}
	}
	g.followFiles(writable, addDir)
	sort.Strings(g.dirs)
	sort.Strings(g.files)
	g.report.GitDirs = len(g.dirs)
	g.report.Micros = time.Since(start).Microseconds()
	return g
}

// dotGit records an entry named .git: a git directory (with those git
// keeps inside it), a link, or a file that names one.
func (g *gitFinds) dotGit(p string, mode fs.FileMode, addDir func(string)) {
	switch {
	case mode.IsDir():
		addDir(p)
		if sub, err := readNames(p); err == nil {
			g.gitDirInside(p, sub, addDir)
		}
	case mode&fs.ModeSymlink != 0:
		g.links = append(g.links, p)
	case mode.IsRegular():
		g.files = append(g.files, p)
	}
}

// gitDirInside adds the git directories git keeps inside one: submodules
// (modules/NAME, NAME possibly nested) and worktrees (worktrees/NAME).
func (g *gitFinds) gitDirInside(dir string, names dirents, add func(string)) {
	if m, ok := names.get("worktrees"); ok && m.IsDir() {
		if sub, err := readNames(filepath.Join(dir, "worktrees")); err == nil {
			for _, e := range sub {
				if e.mode.IsDir() {
					add(filepath.Join(dir, "worktrees", e.name))
				}
			}
		}
	}
	if m, ok := names.get("modules"); ok && m.IsDir() {
		g.modules(filepath.Join(dir, "modules"), 0, add)
	}
}

// modules finds submodule git directories below dir (a module's name may
// hold slashes), bounded in depth.
func (g *gitFinds) modules(dir string, depth int, add func(string)) {
	if depth > 8 {
		g.report.Skipped = append(g.report.Skipped, dir+": submodules nested deeper than 8 levels")
		g.report.Complete = false
		return
	}
	sub, err := readNames(dir)
	if err != nil {
		return
	}
	for _, e := range sub {
		if !e.mode.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.name)
		names, err := readNames(p)
		if err != nil {
			continue
		}
		if isGitDir(names) {
			add(p)
			g.gitDirInside(p, names, add)
			continue
		}
		g.modules(p, depth+1, add)
	}
}

// followFiles reads every .git file's "gitdir:" line and the target's
// commondir, and adds the targets that lie inside a writable directory: git
// reads config and hooks there, wherever the .git file sits.
func (g *gitFinds) followFiles(writable []string, add func(string)) {
	for _, f := range g.files {
		target, err := gitdirOf(f)
		if err != nil {
			continue
		}
		if insideAny(target, writable) {
			add(target)
		}
		if common, err := commondirOf(target); err == nil && insideAny(common, writable) {
			add(common)
		}
	}
}

// gitdirOf reads a .git file's target, resolved like git does: relative to
// the file's directory, then to its real path.
func gitdirOf(file string) (string, error) {
	b, err := readSmall(file)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	t, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return "", errors.New("no gitdir: line")
	}
	t = strings.TrimSpace(t)
	if !filepath.IsAbs(t) {
		t = filepath.Join(filepath.Dir(file), t)
	}
	return filepath.EvalSymlinks(t)
}

// commondirOf reads dir/commondir, resolved against dir.
func commondirOf(dir string) (string, error) {
	b, err := readSmall(filepath.Join(dir, "commondir"))
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if !filepath.IsAbs(t) {
		t = filepath.Join(dir, t)
	}
	return filepath.EvalSymlinks(t)
}

// readSmall reads at most 4 KiB of a regular file, not following a link.
func readSmall(p string) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 4096)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return nil, err
	}
	return b[:n], nil
}

// readNames lists a directory's entries with their types (from getdents:
// no stat per entry), without following a link at its last component.
func readNames(dir string) (dirents, error) {
	var l lister
	return l.readNames(dir)
}

// readNames is readNames with l's buffer.
func (l *lister) readNames(dir string) (dirents, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	ents, err := l.list(fd, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
	}
	return ents, nil
}
