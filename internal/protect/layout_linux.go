package protect

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/policy"
)

// Op is how a protected path is held. The layout never asks for a mount onto a
// path that does not exist: bwrap would create the mount point in the
// user's tree (the workdir is a bind of the host's directory), where git,
// an editor or another run would see it.
type Op int

const (
	// Pin binds an existing directory onto itself, writable: a mount
	// point cannot be renamed or removed (EBUSY), so the path to a held
	// part cannot be swapped for another directory.
	Pin Op = iota
	// Hold binds an existing file or directory onto itself read-only.
	Hold
	// Watch marks a missing path: it cannot be held without a mount
	// point on the host, so what the command creates there is neutralised
	// once the last run on the directory has ended (quarantine, or for a
	// new git directory, stripping what runs a program).
	Watch
)

// String names the op as the layout golden files spell it.
func (o Op) String() string { return [...]string{"pin", "hold", "watch"}[o] }

// Action is one step of the layout: hold Path as Op says. Path is
// absolute and below a writable directory.
type Action struct {
	Path string
	Op   Op
}

// LinkError refuses a symbolic link where a protected path (or a directory
// on the way to one) is: the sandbox's bind, or a later host tool, would
// follow it. Acts turns it into a *fault.Error naming the link's target.
type LinkError struct{ Path string }

func (e *LinkError) Error() string { return e.Path + " is a symbolic link" }

// protectLayout computes how every protected path of every writable
// directory is held, from what exists (kindOf, which must not follow
// links) and the git directories and .git files a walk found. It is pure:
// the same inputs give the same actions, sorted so that a directory comes
// before what lies below it (bwrap mounts in order), and nothing below a
// held path (a read-only bind covers it).
//
// names are relative to each writable directory; absolute ones apply to the
// writable directory that holds them. Every git directory gets its held
// parts (policy.GitHeld) and is pinned; a .git file is held, with the
// directories on the way to it pinned.
func protectLayout(writable, names []string, gitDirs, gitFiles []string, kindOf func(string) hostwalk.Kind) ([]Action, error) {
	acts := map[string]Op{}
	add := func(p string, op Op) {
		if old, ok := acts[p]; !ok || op > old {
			acts[p] = op
		}
	}
	for _, w := range writable {
		for _, name := range names {
			rel := name
			if filepath.IsAbs(name) {
				r, err := filepath.Rel(w, name)
				if err != nil || r == "." || r == ".." || strings.HasPrefix(r, "../") {
					continue
				}
				rel = r
			}
			if err := layoutPath(w, filepath.Clean(rel), kindOf, add); err != nil {
				return nil, err
			}
		}
	}
	for _, g := range gitDirs {
		if err := layoutGitDir(g, writable, kindOf, add); err != nil {
			return nil, err
		}
	}
	for _, f := range gitFiles {
		if w := owner(f, writable); w != "" {
			rel, _ := filepath.Rel(w, f)
			if err := layoutPath(w, rel, kindOf, add); err != nil {
				return nil, err
			}
		}
	}
	return sortActions(acts), nil
}

// layoutGitDir lays out one git directory: the directory pinned (unless
// it is a writable directory itself), each of policy.GitHeld held or
// watched. The directories above it are not pinned (a bind each costs
// bwrap about half a millisecond): one replaced through them is a new git
// directory to the end-of-run walk, which tells them apart by inode.
func layoutGitDir(g string, writable []string, kindOf func(string) hostwalk.Kind, add func(string, Op)) error {
	w := owner(g, writable)
	if w == "" {
		return nil
	}
	if g != w {
		switch kindOf(g) {
		case hostwalk.KindLink:
			return &LinkError{Path: g}
		case hostwalk.KindDir:
			add(g, Pin)
		}
	}
	for _, part := range policy.GitHeld() {
		if err := layoutPath(g, part, kindOf, add); err != nil {
			return err
		}
	}
	return nil
}

// layoutPath lays out one path below w, component by component: existing
// directories on the way are pinned, the path itself is held when it
// exists, and watched from where it stops existing. A file where
// a directory is expected (the .git file of a worktree) is held: it names
// where git looks.
func layoutPath(w, rel string, kindOf func(string) hostwalk.Kind, add func(string, Op)) error {
	parts := strings.Split(rel, "/")
	cur := w
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		last := i == len(parts)-1
		switch kindOf(cur) {
		case hostwalk.KindLink:
			return &LinkError{Path: cur}
		case hostwalk.KindMissing:
			add(filepath.Join(w, rel), Watch)
			return nil
		case hostwalk.KindDir:
			if !last {
				add(cur, Pin)
				continue
			}
			add(cur, Hold)
		default:
			add(cur, Hold)
			return nil
		}
	}
	return nil
}

// owner returns the innermost writable directory holding p, "" if none.
func owner(p string, writable []string) string {
	best := ""
	for _, w := range writable {
		if policy.Within(p, w) && len(w) > len(best) {
			best = w
		}
	}
	return best
}

// sortActions orders the actions by path (a directory sorts before what it
// holds) and drops what lies below a held path.
func sortActions(acts map[string]Op) []Action {
	paths := make([]string, 0, len(acts))
	for p := range acts {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var out []Action
	held := map[string]bool{}
	for _, p := range paths {
		if heldAbove(p, held) {
			continue
		}
		op := acts[p]
		if op == Hold {
			held[p] = true
		}
		out = append(out, Action{Path: p, Op: op})
	}
	return out
}

// heldAbove says whether a directory above p is in held.
func heldAbove(p string, held map[string]bool) bool {
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		if held[d] {
			return true
		}
		if d == "/" || d == "." {
			return false
		}
	}
}

// String is the action as the layout golden files spell it: "op path".
func (a Action) String() string { return fmt.Sprintf("%s %s", a.Op, a.Path) }
