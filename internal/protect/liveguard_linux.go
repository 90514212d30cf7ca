package protect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/audit"
	"github.com/sandbox-run/sandbox-run/internal/gitrepo"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
	"golang.org/x/sys/unix"
)

// The live guard closes the live window of the protected paths
// (docs/protected-paths.md): while a run lasts, an inotify watcher on the
// host side, as the user who runs sandbox-run, watches every directory of
// the run's writable directories and neutralises, as soon as the kernel
// reports them, what the command makes where a host tool would run a
// program: a protected path that was missing at the start is moved to the
// quarantine, and a git directory that did not exist at the start has the
// settings that run a program stripped from its config (stripConfig, as
// the end-of-run sweep does), its hooks and info/attributes moved to the
// quarantine, whenever they are written. The end-of-run settle still runs
// after it, unchanged.
//
// Guarantees: every action is taken from the writable directory down by
// descriptors without following a link (openParent, moveAt, stripConfig);
// a watch is added through a descriptor so opened, so no watch lies
// outside the writable directories; each neutralisation is written to the
// audit as it happens and listed in the report's quarantined list; the
// watches stay within a budget (liveBudget), and when the budget, the
// user's inotify limits or the event queue fail, the report's live_guard
// says which directories went unwatched (and the audit as it happens).
//
// Non-guarantees: the guard acts after the write, never before it. Between
// the command's write and the neutralisation (the bound measured in
// docs/protected-paths.md) a host tool that reads the path sees what was
// written; and until the guard's first pass over the tree has reached a
// directory (report: ready_micros), what the command made there waits for
// that pass. Existing protected paths that a mechanism cannot hold
// read-only (--sandbox landlock's copies) are not restored while the run
// lasts, only when it settles.

// Watch masks: any directory is watched for new entries; a git directory
// the command made, also for writes to its files (config written in
// place); a config file itself for writes through another hard link.
const (
	maskDir     = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_EXCL_UNLINK | unix.IN_ONLYDIR
	maskNewGit  = maskDir | unix.IN_MODIFY | unix.IN_CLOSE_WRITE
	maskFile    = unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB
	guardBatch  = 64 // directories watched between two reads of the event queue
	eventBufLen = 64 << 10
)

// guardKind says what a watched inode is to the guard.
type guardKind uint8

const (
	kindDirW   guardKind = iota // any directory of the writable dirs
	kindOldGit                  // a git directory that existed at the start
	kindNewGit                  // a git directory the command made
	kindHooks                   // hooks/ of a new git directory
	kindInfo                    // info/ of a new git directory
	kindConfig                  // config or config.worktree of a new git directory
)

type guardWatch struct {
	path string
	kind guardKind
	ino  uint64 // a config file's inode (kindConfig)
}

// liveGuard is one run's watcher. Only its goroutine touches its fields
// between start and stop.
type liveGuard struct {
	fd, wake int
	writable []string
	watched  []string        // protected paths missing at the start
	near     map[string]bool // watched paths and every directory above one
	old      map[GitID]bool  // git directories and .git entries at the start
	commons  map[string]bool // commondir targets named by new git directories
	q        *quarantine
	audit    io.Writer
	runID    string
	wds      map[int32]guardWatch
	queue    []guardWatch
	rescan   bool // a pass over everything after an overflow is queued
	again    bool // another overflow came during it
	budget   int
	rep      report.LiveGuardReport
	start    time.Time
	done     chan struct{}
	l        hostwalk.Lister
}

// liveBudget is the run's ceiling on inotify watches: a quarter of the
// user's max_user_watches (the user's editors and other runs keep the
// rest), at most 65,536 and at least 1,024.
func liveBudget() int {
	n := 8192
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			n = v
		}
	}
	return min(max(n/4, 1024), 65536)
}

// startLiveGuard starts the guard over writable: the top of every
// writable directory is watched and looked at before it returns (the
// protected names live there), the rest by the guard's goroutine while the
// command starts. budget is the ceiling on watches (0: liveBudget). An
// error means no guard: the caller names the loss.
func startLiveGuard(writable, watched []string, gits []GitID, q *quarantine, audit io.Writer, runID string, budget int) (*liveGuard, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w (the user's fs.inotify.max_user_instances may be used up)", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	g := &liveGuard{fd: fd, wake: wake, writable: writable, watched: watched, q: q, audit: audit, runID: runID,
		near: map[string]bool{}, old: map[GitID]bool{}, commons: map[string]bool{}, wds: map[int32]guardWatch{},
		budget: budget, start: time.Now(), done: make(chan struct{})}
	if g.budget <= 0 {
		g.budget = liveBudget()
	}
	g.rep = report.LiveGuardReport{Budget: g.budget, Complete: true}
	for _, p := range watched {
		for d := p; owner(d, writable) != "" && !g.near[d]; d = filepath.Dir(d) {
			g.near[d] = true
		}
	}
	for _, id := range gits {
		g.old[id] = true
	}
	for _, w := range writable {
		g.visit(guardWatch{path: w, kind: kindDirW})
	}
	go g.loop()
	return g, nil
}

// stop ends the guard and returns its report; what it quarantined is in
// its quarantine's items.
func (g *liveGuard) stop() report.LiveGuardReport {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(g.wake, one[:])
	<-g.done
	unix.Close(g.fd)
	unix.Close(g.wake)
	g.rep.Watches = len(g.wds)
	return g.rep
}

// loop reads events and, between them, watches the directories queued
// (the first pass, and every directory that appears), until stop.
func (g *liveGuard) loop() {
	defer close(g.done)
	buf := make([]byte, eventBufLen)
	for {
		timeout := -1
		if len(g.queue) > 0 {
			timeout = 0
		} else if g.rep.ReadyMicros == 0 {
			g.rep.ReadyMicros = max(time.Since(g.start).Microseconds(), 1)
		}
		fds := []unix.PollFd{{Fd: int32(g.fd), Events: unix.POLLIN}, {Fd: int32(g.wake), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, timeout); err != nil && !errors.Is(err, unix.EINTR) {
			g.lose("polling the inotify queue failed: " + err.Error())
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents != 0 {
			g.read(buf)
		}
		for i := 0; i < guardBatch && len(g.queue) > 0; i++ {
			it := g.queue[0]
			g.queue = g.queue[1:]
			g.visit(it)
		}
		if len(g.queue) == 0 && g.rescan {
			g.rescan = false
			if g.again {
				g.again = false
				g.queueAll()
			}
		}
	}
}

// queueAll queues a pass over every writable directory.
func (g *liveGuard) queueAll() {
	g.rescan = true
	for _, w := range g.writable {
		g.queue = append(g.queue, guardWatch{path: w, kind: kindDirW})
	}
}

// readRounds bounds one read of the event queue, so that a command making
// entries without pause neither starves the first pass nor delays stop.
const readRounds = 16

// read handles the events the queue holds, at most readRounds buffers.
func (g *liveGuard) read(buf []byte) {
	for range readRounds {
		n, err := unix.Read(g.fd, buf)
		if err != nil || n <= 0 {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			ln := int(binary.NativeEndian.Uint32(buf[off+12:]))
			name := ""
			if end := off + unix.SizeofInotifyEvent + ln; ln > 0 && end <= n {
				name = strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:end]), "\x00")
			}
			off += unix.SizeofInotifyEvent + ln
			g.event(wd, mask, name)
		}
	}
}

// event handles one inotify event.
func (g *liveGuard) event(wd int32, mask uint32, name string) {
	switch {
	case mask&unix.IN_Q_OVERFLOW != 0:
		// Events were lost: look at everything again (a watch added
		// again is the same watch, and costs nothing more), once more
		// after a pass already under way.
		g.rep.Overflows++
		if g.rescan {
			g.again = true
			return
		}
		g.queueAll()
		return
	case mask&unix.IN_IGNORED != 0:
		delete(g.wds, wd)
		return
	}
	w, ok := g.wds[wd]
	if !ok {
		return
	}
	if w.kind == kindConfig {
		g.stripConfigAt(w.path)
		g.dropMoved(wd, w.path)
		return
	}
	if name == "" || strings.Contains(name, "/") {
		return
	}
	p := filepath.Join(w.path, name)
	isNew := mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0
	if isNew && g.near[p] {
		g.protectedAt(p)
	}
	switch w.kind {
	case kindNewGit:
		g.newGitEntry(w.path, name, mask)
	case kindHooks:
		if isNew && !strings.HasSuffix(name, ".sample") {
			g.act(func() { g.q.moveAt(g.owner(p), p, "a hook in a git directory created during the run") })
		}
	case kindInfo:
		if isNew && name == "attributes" {
			g.act(func() { g.q.moveAt(g.owner(p), p, "attributes of a git directory created during the run") })
		}
	default:
		if isNew {
			g.dirEntry(w, p, name, mask&unix.IN_ISDIR != 0)
		}
	}
}

// dirEntry handles a new entry of a directory that is not a new git
// directory: a .git, a directory to watch, or a name that may make its
// directory a git directory.
func (g *liveGuard) dirEntry(w guardWatch, p, name string, isDir bool) {
	switch {
	case name == ".git":
		g.dotGit(p)
	case w.kind == kindOldGit:
		// Inside a git directory held since the start, only what holds
		// further git directories is looked into.
		if isDir && (name == "modules" || name == "worktrees") {
			g.queue = append(g.queue, guardWatch{path: p, kind: kindDirW})
		}
	case isDir && !gitInternal(w.path, name):
		g.queue = append(g.queue, guardWatch{path: p, kind: kindDirW})
	}
	if w.kind == kindDirW && (name == "HEAD" || name == "objects" || name == "refs" || name == "commondir") {
		g.queue = append(g.queue, guardWatch{path: w.path, kind: kindDirW})
	}
}

// visit watches directory it.path (opened from its writable directory
// without following a link), then lists it, so that nothing made before
// the watch is missed: a git directory is handled (its watch changed to
// a git directory's), a .git entry looked at, and every other directory
// queued. A directory visited again keeps its one watch.
func (g *liveGuard) visit(it guardWatch) {
	fd, err := g.openDir(it.path)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if !g.watch(fd, it.path, kindDirW, maskDir) {
		return
	}
	names, err := g.l.List(fd, 0)
	if err != nil {
		return
	}
	names = append(hostwalk.Dirents(nil), names...)
	if gitrepo.HasNames(names.Get) || g.commons[it.path] && isCommonDir(names) {
		g.gitDir(it.path, fd, names)
		return
	}
	for _, e := range names {
		p := filepath.Join(it.path, e.Name)
		if g.near[p] {
			g.protectedAt(p)
		}
		switch {
		case e.Name == ".git":
			g.dotGit(p)
		case e.Mode.IsDir() && !gitInternal(it.path, e.Name):
			g.queue = append(g.queue, guardWatch{path: p, kind: kindDirW})
		}
	}
}

// gitInternal says whether name, in directory parent, is a part of a .git
// directory that holds no git directory (objects, refs, logs, ...): a
// .git not yet complete (git init makes HEAD after them) is not walked
// through its objects, whose fan-out would spend the watch budget.
func gitInternal(parent, name string) bool {
	return filepath.Base(parent) == ".git" && name != "modules" && name != "worktrees"
}

// gitDir handles a git directory found at d (fd open on it): one that
// existed at the start is held by the mechanism, and only where further
// git directories may appear is watched; a new one is watched for writes
// and neutralised now.
func (g *liveGuard) gitDir(d string, fd int, names hostwalk.Dirents) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return
	}
	if g.old[GitID{Path: d, Dev: st.Dev, Ino: st.Ino}] {
		if !g.watch(fd, d, kindOldGit, maskDir) {
			return
		}
		for _, sub := range []string{"modules", "worktrees"} {
			if m, ok := names.Get(sub); ok && m.IsDir() {
				g.queue = append(g.queue, guardWatch{path: filepath.Join(d, sub), kind: kindDirW})
			}
		}
		return
	}
	if !g.watch(fd, d, kindNewGit, maskNewGit) {
		return
	}
	for _, name := range []string{"config", "config.worktree", "hooks", "info", "commondir", "modules", "worktrees"} {
		if _, ok := names.Get(name); ok {
			g.newGitEntry(d, name, unix.IN_CREATE)
		}
	}
}

// newGitEntry handles what appeared or was written in a new git
// directory d.
func (g *liveGuard) newGitEntry(d, name string, mask uint32) {
	p := filepath.Join(d, name)
	isNew := mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0
	switch name {
	case "config", "config.worktree":
		g.stripConfigAt(p)
		if isNew {
			g.watchConfig(p)
		}
	case "hooks", "info":
		if isNew {
			g.gitSubdir(p, name)
		}
	case "commondir":
		if t, ok := commondirTarget(d); ok && owner(t, g.writable) != "" {
			g.commons[t] = true
			g.queue = append(g.queue, guardWatch{path: t, kind: kindDirW})
		}
	case "modules", "worktrees":
		if isNew {
			g.queue = append(g.queue, guardWatch{path: p, kind: kindDirW})
		}
	}
}

// gitSubdir watches a new git directory's hooks/ or info/ and moves out
// what it holds that makes git run a program; a link there is moved
// itself (git would follow it).
func (g *liveGuard) gitSubdir(p, name string) {
	w := g.owner(p)
	fd, err := g.openDir(p)
	if err != nil {
		if hostwalk.LstatKind(p) == hostwalk.KindLink {
			g.act(func() { g.q.moveAt(w, p, "a symbolic link in place of a new git directory's "+name) })
		}
		return
	}
	defer unix.Close(fd)
	kind := kindHooks
	if name == "info" {
		kind = kindInfo
	}
	if !g.watch(fd, p, kind, maskDir) {
		return
	}
	names, err := g.l.List(fd, 0)
	if err != nil {
		return
	}
	for _, e := range append(hostwalk.Dirents(nil), names...) {
		q := filepath.Join(p, e.Name)
		switch {
		case kind == kindHooks && !strings.HasSuffix(e.Name, ".sample"):
			g.act(func() { g.q.moveAt(w, q, "a hook in a git directory created during the run") })
		case kind == kindInfo && e.Name == "attributes":
			g.act(func() { g.q.moveAt(w, q, "attributes of a git directory created during the run") })
		}
	}
}

// dropMoved removes the watch on a config file that is no longer at p
// (moved to the quarantine, or replaced by the stripped copy, which has
// its own watch).
func (g *liveGuard) dropMoved(wd int32, p string) {
	var st unix.Stat_t
	if unix.Lstat(p, &st) == nil && st.Ino == g.wds[wd].ino {
		return
	}
	unix.InotifyRmWatch(g.fd, uint32(wd))
	delete(g.wds, wd)
}

// watchConfig watches a new git directory's config file itself, so that a
// write through another hard link of it is seen.
func (g *liveGuard) watchConfig(p string) {
	parent, name, err := openParent(g.owner(p), p)
	if err != nil {
		return
	}
	defer unix.Close(parent)
	fd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		g.watchAs(fd, guardWatch{path: p, kind: kindConfig, ino: st.Ino}, maskFile)
	}
}

// stripConfigAt strips a new git directory's config or config.worktree
// (stripConfig); one that is a link, or a file with other names (written
// through them, it would change behind the directory's back), is moved
// whole.
func (g *liveGuard) stripConfigAt(p string) {
	w := g.owner(p)
	if w == "" {
		return
	}
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil {
		return
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		g.act(func() { g.q.moveAt(w, p, "a symbolic link in place of a new git directory's config") })
	case st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1:
		g.act(func() { g.q.moveAt(w, p, "a new git directory's config with other hard links") })
	default:
		g.act(func() { g.q.stripConfig(w, p) })
	}
}

// dotGit handles a .git entry: a link made since the start is moved out
// (git follows it, and it cannot be held); a directory is queued; a
// file's gitdir: target (and that target's commondir) are looked at
// again, as git would read them.
func (g *liveGuard) dotGit(p string) {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil {
		return
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		if !g.old[GitID{Path: p, Dev: st.Dev, Ino: st.Ino}] {
			g.act(func() { g.q.moveAt(g.owner(p), p, "a .git link created during the run") })
		}
	case unix.S_IFDIR:
		g.queue = append(g.queue, guardWatch{path: p, kind: kindDirW})
	case unix.S_IFREG:
		if t, err := gitrepo.ReadGitfile(p); err == nil && owner(t, g.writable) != "" {
			g.queue = append(g.queue, guardWatch{path: t, kind: kindDirW})
		}
	}
}

// protectedAt moves to the quarantine each watched path at or below p
// that now exists, or the link on the way to it.
func (g *liveGuard) protectedAt(p string) {
	for _, wp := range g.watched {
		if policy.Within(wp, p) {
			g.act(func() {
				g.q.moveAt(g.owner(wp), wp, "created during the run where a protected path was missing; moved as it appeared")
			})
		}
	}
}

// act runs one neutralisation and writes what it quarantined to the
// audit as it happens.
func (g *liveGuard) act(f func()) {
	n := len(g.q.items)
	f()
	for _, it := range g.q.items[n:] {
		g.rep.Neutralised++
		audit.Event(g.audit, g.runID, "live_quarantine", map[string]any{"path": it.Path, "to": it.To, "why": it.Why})
	}
}

// watch adds a watch on the directory or file open at fd, within the
// budget; false when it was not added, the loss recorded.
func (g *liveGuard) watch(fd int, p string, kind guardKind, mask uint32) bool {
	return g.watchAs(fd, guardWatch{path: p, kind: kind}, mask)
}

// watchAs is watch with the whole of what is recorded for the watch.
func (g *liveGuard) watchAs(fd int, gw guardWatch, mask uint32) bool {
	p, kind := gw.path, gw.kind
	if len(g.wds) >= g.budget {
		g.lose(fmt.Sprintf("the run's budget of %d inotify watches is spent: %s and what appears below it are not watched while the run lasts (neutralised when it ends)", g.budget, p))
		return false
	}
	// IN_MASK_ADD: a directory watched again (visited as a plain one
	// after it was found to be a git directory's hooks) keeps what it was
	// watched for, and its kind.
	wd, err := unix.InotifyAddWatch(g.fd, "/proc/self/fd/"+strconv.Itoa(fd), mask|unix.IN_MASK_ADD)
	if err != nil {
		g.lose(fmt.Sprintf("cannot watch %s: %v (fs.inotify.max_user_watches spent?); it is neutralised when the run ends", p, err))
		return false
	}
	if old, ok := g.wds[int32(wd)]; ok && kind == kindDirW && old.kind != kindDirW {
		gw.kind = old.kind
	}
	g.wds[int32(wd)] = gw
	return true
}

// lose records, once per cause, that the guard does not cover something;
// every later loss is counted.
func (g *liveGuard) lose(why string) {
	if g.rep.Complete {
		audit.Event(g.audit, g.runID, "live_guard_incomplete", map[string]any{"why": why})
	}
	g.rep.Complete = false
	if len(g.rep.Lost) < 8 {
		g.rep.Lost = append(g.rep.Lost, why)
	}
	g.rep.Unwatched++
}

// openDir opens directory p for listing, from its writable directory,
// without following a link on the way or at its end.
func (g *liveGuard) openDir(p string) (int, error) {
	w := g.owner(p)
	if w == "" {
		return -1, fs.ErrNotExist
	}
	if p == w {
		return unix.Open(w, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	parent, name, err := openParent(w, p)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	return unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

func (g *liveGuard) owner(p string) string { return owner(p, g.writable) }

// isCommonDir says whether a directory a commondir names holds what git
// reads there (objects and refs; its config is then read).
func isCommonDir(names hostwalk.Dirents) bool {
	o, ok1 := names.Get("objects")
	r, ok2 := names.Get("refs")
	return ok1 && ok2 && o.IsDir() && r.IsDir()
}

// commondirTarget is where git directory d's commondir points, resolved
// as far as it exists (git resolves it against d).
func commondirTarget(d string) (string, bool) {
	if t, err := gitrepo.CommonDir(d); err == nil {
		return t, true
	}
	b, err := gitrepo.ReadBounded(filepath.Join(d, "commondir"), 1<<16, false)
	if err != nil {
		return "", false
	}
	t := strings.TrimSpace(string(b))
	if !filepath.IsAbs(t) {
		t = filepath.Join(d, t)
	}
	return filepath.Clean(t), true
}
