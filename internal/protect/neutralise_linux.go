package protect

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/gitrepo"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/report"
)

// quarantine moves what the run's commands created out of the way. q is
// where items go (made on first use); every step holds the parent by a
// descriptor and never follows a link in the writable directory.
type quarantine struct {
	dir   string
	run   string
	items []report.Quarantined
	made  bool
	// earliest is, per snapshotted path, its earliest copy among the
	// journals settled together (see restoreHeld).
	earliest map[string]int64
	// bounds bound each sweep's walk; sweep adds up what they walked
	// (nil: no sweep yet).
	bounds hostwalk.Bounds
	sweep  *report.WalkReport
}

// walk walks writable for git directories within q's bounds and adds the
// walk's report to q's sweep.
func (q *quarantine) walk(writable []string) *hostwalk.GitFinds {
	g := hostwalk.FindGit(writable, q.bounds)
	q.sweep = mergeWalks(q.sweep, &g.Report)
	return g
}

// neutralise handles the journal of a run that has ended and shares its
// writable directories with no live run: every watched path that now exists
// (or a link on the way to it) is quarantined, every git directory that did
// not exist at its start is stripped, and a .git link made since is
// quarantined. Last, every snapshotted path that changed is quarantined
// and put back (restoreHeld): after the stripping, so that a git
// directory's held parts end as they were at the start.
func (q *quarantine) neutralise(j *journal, finds *hostwalk.GitFinds) {
	defer q.restoreHeld(j)
	q.run = j.RunID
	var ks hostwalk.Kinds
	for _, p := range j.Watched {
		w := owner(p, j.Writable)
		if w != "" && !absentBelow(&ks, w, p) {
			q.moveAt(w, p, "created during the run where a protected path was missing")
		}
	}
	old := map[GitID]bool{}
	for _, g := range j.Gits {
		old[g] = true
	}
	now := func(p string) GitID {
		ids := GitIDs([]string{p})
		if len(ids) == 0 {
			return GitID{Path: p}
		}
		return ids[0]
	}
	for _, d := range finds.Dirs {
		if !old[now(d)] {
			q.stripGitDir(d, j.Writable)
		}
	}
	for _, l := range finds.Links {
		if !old[now(l)] {
			if w := owner(l, j.Writable); w != "" {
				q.moveAt(w, l, "a .git link created during the run")
			}
		}
	}
}

// absentBelow reports whether the first component of p below w is
// absent from w's listing: then nothing at p exists, nor any link on the
// way to it, and moveAt has nothing to do. Most watched names stay absent,
// so this is one listing of w instead of a walk per name. Anything else,
// a link on the way included, is left to moveAt.
func absentBelow(ks *hostwalk.Kinds, w, p string) bool {
	rel, err := filepath.Rel(w, p)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return false
	}
	first, _, _ := strings.Cut(rel, "/")
	k, ok := ks.Lookup(filepath.Join(w, first))
	return ok && k == hostwalk.KindMissing
}

// stripGitDir removes from a git directory the command created whatever
// makes git run a program: settings outside gitKeep in config and
// config.worktree, hooks other than git's *.sample ones, and
// info/attributes. Refs, objects and the index stay: the repository is the
// command's work.
func (q *quarantine) stripGitDir(d string, writable []string) {
	w := owner(d, writable)
	if w == "" {
		return
	}
	for _, name := range []string{"config", "config.worktree"} {
		q.stripConfig(w, filepath.Join(d, name))
	}
	// git follows a link at hooks or info: the link is what is moved.
	for _, name := range []string{"hooks", "info"} {
		if p := filepath.Join(d, name); hostwalk.LstatKind(p) == hostwalk.KindLink {
			q.moveAt(w, p, "a symbolic link in place of a new git directory's "+name)
		}
	}
	if names, err := hostwalk.ReadNames(filepath.Join(d, "hooks")); err == nil {
		var hooks []string
		for _, e := range names {
			if !strings.HasSuffix(e.Name, ".sample") {
				hooks = append(hooks, e.Name)
			}
		}
		sort.Strings(hooks)
		for _, n := range hooks {
			q.moveAt(w, filepath.Join(d, "hooks", n), "a hook in a git directory created during the run")
		}
	}
	q.moveAt(w, filepath.Join(d, "info", "attributes"), "attributes of a git directory created during the run")
}

// stripConfig rewrites a new git directory's config file without the
// settings gitKeep does not allow; the original goes to the quarantine.
func (q *quarantine) stripConfig(w, p string) {
	parent, name, err := openParent(w, p)
	if err != nil {
		return
	}
	defer unix.Close(parent)
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ELOOP) {
		// git reads its config through a link: the link is moved.
		q.moveAt(w, p, "a symbolic link where a new git directory's config is")
		return
	}
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), p)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		q.moveAt(w, p, "not a regular file where a new git directory's config is")
		return
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	f.Close()
	if err != nil {
		return
	}
	kept, dropped := gitrepo.StripConfig(string(b))
	if !dropped {
		return
	}
	to, err := q.take(parent, name, p)
	if err != nil {
		q.items = append(q.items, report.Quarantined{Path: p, Why: "cannot quarantine: " + fault.Reason(err), Run: q.run})
		return
	}
	// A config with nothing left to keep is not rewritten: sandbox-run
	// makes no file in the user's tree that the command did not make.
	nfd, err := -1, error(nil)
	if kept != "" {
		nfd, err = unix.Openat(parent, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(st.Mode&0o666))
	}
	if nfd >= 0 && err == nil {
		unix.Write(nfd, []byte(kept))
		unix.Fchown(nfd, int(st.Uid), int(st.Gid))
		unix.Close(nfd)
	}
	q.items = append(q.items, report.Quarantined{Path: p, To: to,
		Why: "a git directory created during the run: its settings that can run a program were removed, the rest kept", Run: q.run})
}

// moveAt quarantines p (below writable directory w) if it exists; a link
// on the way to it is quarantined instead, since it is what a host tool
// would follow.
func (q *quarantine) moveAt(w, p, why string) {
	parent, name, err := openParent(w, p)
	var le *LinkError
	if errors.As(err, &le) {
		p, why = le.Path, "a symbolic link on the way to a protected path, made during the run"
		parent, name, err = openParent(w, le.Path)
	}
	if err != nil {
		return
	}
	defer unix.Close(parent)
	var st unix.Stat_t
	if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return
	}
	to, err := q.take(parent, name, p)
	if err != nil {
		q.items = append(q.items, report.Quarantined{Path: p, Why: why + "; cannot quarantine: " + fault.Reason(err), Run: q.run})
		return
	}
	q.items = append(q.items, report.Quarantined{Path: p, To: to, Why: why, Run: q.run})
}

// take moves name (in the directory parent, which is p's) into the
// quarantine, keeping p's path below it. The quarantine is sandbox-run's
// own state: every directory on the way to the destination is made or
// opened without following a link, the last one must be this user's and
// closed to others (pathguard.OpenPrivateDir), and the move is made
// between the two descriptors, so no link on either side is followed.
func (q *quarantine) take(parent int, name, p string) (string, error) {
	to := filepath.Join(q.dir, strings.TrimPrefix(p, "/"))
	d, err := pathguard.OpenPrivateDir(filepath.Dir(to))
	if err != nil {
		return "", err
	}
	defer d.Close()
	q.made = true
	base := filepath.Base(to)
	var st unix.Stat_t
	if unix.Fstatat(d.Fd(), base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		base += "." + strconv.Itoa(len(q.items))
		to = filepath.Join(filepath.Dir(to), base)
	}
	err = unix.Renameat(parent, name, d.Fd(), base)
	if errors.Is(err, unix.EXDEV) {
		// Another file system: copy, then remove. Nothing is followed
		// below the two descriptors.
		src := fmt.Sprintf("/proc/self/fd/%d/%s", parent, name)
		if err = copyTree(src, fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), base)); err == nil {
			err = os.RemoveAll(src)
		}
	}
	return to, err
}

// openParent opens p's directory by descriptor, component by component
// from w, refusing a link on the way (a *LinkError naming it).
func openParent(w, p string) (int, string, error) {
	rel, err := filepath.Rel(w, p)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return -1, "", fmt.Errorf("%s is not below %s", p, w)
	}
	fd, err := unix.Open(w, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	parts := strings.Split(rel, "/")
	cur := w
	for _, part := range parts[:len(parts)-1] {
		cur = filepath.Join(cur, part)
		next, err := unix.Openat(fd, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			var st unix.Stat_t
			if unix.Fstatat(fd, part, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = &LinkError{Path: cur}
			}
			unix.Close(fd)
			return -1, "", err
		}
		unix.Close(fd)
		fd = next
	}
	return fd, parts[len(parts)-1], nil
}

// copyTree copies regular files, directories and links (as links) from
// src to dst; anything else is left out.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		t, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(t, dst)
	case fi.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case fi.Mode().IsRegular():
		in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, in)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return nil
}
