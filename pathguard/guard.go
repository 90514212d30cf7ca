package pathguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// ErrEscape is the sentinel every refusal of this package matches
// (errors.Is). The error itself is always an [*EscapeError] carrying the
// details.
var ErrEscape = errors.New("pathguard: bind reaches through a writable directory")

// ErrChanged means the path no longer leads to the inode the walk checked:
// something changed it between [Resolve] and [Resolution.Open]. Nothing was
// opened; resolving and checking again is safe, binding the old path is not.
var ErrChanged = errors.New("pathguard: path changed after it was checked")

// The kinds of [EscapeError].
const (
	KindRead     = "read"     // a read-only bind source reaches a writable dir
	KindDest     = "dest"     // a mount destination passes through a link in a writable dir
	KindWritable = "writable" // a writable dir is reached through a link in another writable dir
	KindHost     = "host"     // a file sandbox-run itself opens on the host lies in or resolves through a writable dir
)

// EscapeError is a refused bind. It matches [ErrEscape] with errors.Is.
type EscapeError struct {
	Bind     string // the path as the caller gave it
	Link     string // the symbolic link followed, "" when none was
	Target   string // Link's target as the link spells it, "" when Link is ""
	Writable string // the writable dir in the spelling the path met; "P (the same directory as W)" for an alias P of W
	Kind     string // KindRead, KindDest or KindWritable
}

// Error returns one line: the bind, the link followed, the writable dir and
// what to do about it ("pathguard: WHY: FIX", see Reason).
func (e *EscapeError) Error() string {
	why, fix := e.Reason()
	return "pathguard: " + why + ": " + fix
}

// Reason returns why the bind is refused (the bind, the link followed, the
// writable dir) and the fix, apart, for a caller that says them in its
// own shape.
func (e *EscapeError) Reason() (why, fix string) {
	via := ""
	if e.Link != "" {
		via = fmt.Sprintf(" through symlink %s -> %s", e.Link, e.Target)
	}
	switch e.Kind {
	case KindDest:
		return fmt.Sprintf("mount destination %s passes%s inside writable dir %s, which bwrap would follow", e.Bind, via, e.Writable),
			"remove the link before the run"
	case KindWritable:
		return fmt.Sprintf("writable dir %s is reached%s inside writable dir %s", e.Bind, via, e.Writable),
			"name the link's target directly, or remove the link"
	case KindHost:
		return fmt.Sprintf("host file %s reaches writable dir %s%s, where the sandboxed command can replace it", e.Bind, e.Writable, via),
			"name a file outside every --workdir and --write dir"
	}
	if e.Link == "" {
		return fmt.Sprintf("read bind %s lies inside writable dir %s", e.Bind, e.Writable),
			fmt.Sprintf("bind a path outside writable dirs, or stop making %s writable", e.Writable)
	}
	return fmt.Sprintf("read bind %s reaches writable dir %s%s", e.Bind, e.Writable, via),
		"remove the link or bind its target directly, outside writable dirs"
}

// Is reports whether target is [ErrEscape].
func (e *EscapeError) Is(target error) bool { return target == ErrEscape }

// Guard holds the writable set of one run. It is immutable after [New] and
// safe for concurrent use. It re-walks the path on every check: a Guard
// from [New] caches nothing, one from [Resolver.Guard] walks through that
// Resolver's memo (one snapshot for the whole plan).
type Guard struct {
	dirs []writableDir
	rv   *Resolver // nil: no memo
}

// writableDir is one writable directory in both of its spellings.
type writableDir struct {
	given string
	res   Resolution // res.Path is the resolved spelling; res.final its inode
}

// New builds a Guard for the writable directories, each given as an
// absolute, clean path. Each directory enters the writable set in both
// spellings: as given, and fully resolved.
//
// New fails (error wrapping [fs.ErrInvalid], [fs.ErrNotExist] or
// [syscall.ENOTDIR]) if a path is not absolute and clean, does not exist or
// is not a directory, and refuses with an [*EscapeError] of kind
// [KindWritable] a directory whose walk follows a symbolic link lying inside
// another writable directory: that link is the sandboxed command's to
// choose, so it could point the writable bind anywhere. An empty list gives a
// Guard that refuses nothing.
func New(writable []string) (*Guard, error) {
	return (*Resolver)(nil).Guard(writable)
}

// Guard is [New] for a Guard whose walks, New's own included, go through
// rv's memo.
func (rv *Resolver) Guard(writable []string) (*Guard, error) {
	g := &Guard{dirs: make([]writableDir, 0, len(writable)), rv: rv}
	for _, w := range writable {
		r, err := rv.Resolve(w)
		if err != nil {
			return nil, fmt.Errorf("pathguard: writable dir: %w", err)
		}
		if !r.Exists {
			return nil, fmt.Errorf("pathguard: writable dir %s: %w", w, fs.ErrNotExist)
		}
		if !r.final.IsDir() {
			return nil, fmt.Errorf("pathguard: writable dir %s: %w", w, syscall.ENOTDIR)
		}
		g.dirs = append(g.dirs, writableDir{given: w, res: r})
	}
	for i, d := range g.dirs {
		if e := g.escape(d.given, d.res, KindWritable, i); e != nil {
			return nil, e
		}
	}
	return g, nil
}

// Writable returns the writable directories, resolved, in the order given,
// without duplicates: what to mount read-write. Each can be opened with
// [Resolution.Open] for --bind-fd. The result is a copy.
func (g *Guard) Writable() []Resolution {
	out := make([]Resolution, 0, len(g.dirs))
	for _, d := range g.dirs {
		if slices.ContainsFunc(out, func(r Resolution) bool { return r.Path == d.res.Path }) {
			continue
		}
		r := d.res
		r.Visited = slices.Clone(r.Visited)
		r.steps = slices.Clone(r.steps)
		out = append(out, r)
	}
	return out
}

// CheckRead resolves src, a read-only bind source, and refuses it with an
// [*EscapeError] of kind [KindRead] when any path the walk visited (see
// [Resolution.Visited]) is inside or equal to a writable directory, in
// either spelling, or is the same directory (device and inode) as one. The
// refusal names the first symbolic link inside a writable directory the walk
// followed, or else the last link followed before the walk reached it.
//
// A src that does not exist is not refused for that: the Resolution has
// Exists == false and the caller decides. Resolve's errors are returned
// wrapped. On success, open the Resolution with [Resolution.Open] and bind
// the descriptor, not the path.
func (g *Guard) CheckRead(src string) (Resolution, error) {
	r, err := g.rv.Resolve(src)
	if err != nil {
		return Resolution{}, fmt.Errorf("pathguard: read bind: %w", err)
	}
	if e := g.escape(src, r, KindRead, -1); e != nil {
		return Resolution{}, e
	}
	return r, nil
}

// CheckDest walks dst, a mount destination given as the host path that the
// sandbox sees at the same place (a writable dir is mounted at its own
// path), and refuses it with an [*EscapeError] of kind [KindDest] when the
// walk follows a symbolic link that lies inside a writable directory: bwrap
// follows links at the destination, so such a link would choose where the
// mount lands. Links outside the writable set are followed and allowed;
// components that do not exist yet are allowed. Resolve's errors (ELOOP
// included) are returned wrapped.
//
// The check holds for the state at the time of the call; the writable set
// must not be written by anyone else until bwrap has mounted (see the
// package doc).
func (g *Guard) CheckDest(dst string) error {
	r, err := g.rv.Resolve(dst)
	if err != nil {
		return fmt.Errorf("pathguard: mount destination: %w", err)
	}
	if e := g.escape(dst, r, KindDest, -1); e != nil {
		return e
	}
	return nil
}

// Resolver returns the Resolver g walks through (nil: none), so that the
// other walks of the same plan share its memo.
func (g *Guard) Resolver() *Resolver { return g.rv }

// spelling is one way of writing a writable directory.
type spelling struct {
	path string
	dir  int // index into Guard.dirs
}

// escape applies the rule of kind to the walk r of bind, skipping writable
// dir number except (-1: none). KindRead and KindHost consider every
// visited path, KindDest and KindWritable only the symbolic links.
func (g *Guard) escape(bind string, r Resolution, kind string, except int) *EscapeError {
	sp := g.spellings(r, except)
	hit, lastLink := -1, -1
	var hitW spelling
	for i, s := range r.steps {
		if s.kind == stepLink {
			if w, ok := within(sp, s.path, true); ok {
				// A link inside the writable set: the command's choice.
				return g.escapeError(bind, kind, s, w)
			}
		}
		if (kind != KindRead && kind != KindHost) || hit >= 0 {
			continue
		}
		if s.kind == stepLink {
			lastLink = i
		}
		if w, ok := within(sp, s.path, false); ok {
			hit, hitW = i, w
		}
	}
	if hit < 0 {
		return nil
	}
	var link step
	if lastLink >= 0 {
		link = r.steps[lastLink]
	}
	return g.escapeError(bind, kind, link, hitW)
}

// spellings are every way of writing the writable dirs but number except
// (-1: none): as given, as resolved, and as any directory on the walk r
// that is one of them under another name (a bind mount of it).
func (g *Guard) spellings(r Resolution, except int) []spelling {
	var sp []spelling
	for i, d := range g.dirs {
		if i != except {
			sp = append(sp, spelling{d.given, i}, spelling{d.res.Path, i})
		}
	}
	for _, s := range r.steps {
		if s.kind != stepEntry || !s.fi.IsDir() {
			continue
		}
		for i, d := range g.dirs {
			if i != except && os.SameFile(s.fi, d.res.final) {
				sp = append(sp, spelling{s.path, i})
			}
		}
	}
	return sp
}

// within reports the spelling p is inside of. A link is the command's
// choice only when it lies strictly inside a writable dir (strict): a
// link equal to one (the given spelling of W is itself a link) sits in
// W's parent, which the command cannot write.
func within(sp []spelling, p string, strict bool) (spelling, bool) {
	for _, w := range sp {
		if inside(p, w.path) && !(strict && p == w.path) {
			return w, true
		}
	}
	return spelling{}, false
}

func (g *Guard) escapeError(bind, kind string, link step, w spelling) *EscapeError {
	d := g.dirs[w.dir]
	writable := w.path
	if writable != d.given && writable != d.res.Path {
		writable = fmt.Sprintf("%s (the same directory as %s)", w.path, d.given)
	}
	return &EscapeError{Bind: bind, Link: link.path, Target: link.target, Writable: writable, Kind: kind}
}
