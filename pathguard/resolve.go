package pathguard

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
)

// maxSymlinks is the number of symbolic links one resolution may follow. It
// is the kernel's MAXSYMLINKS: the 41st link fails with ELOOP.
const maxSymlinks = 40

// Resolution is the outcome of walking one path. Only [Resolve] (and the
// Guard methods built on it) produce a usable Resolution: the unexported
// record of what the walk saw is what [Resolution.Open] verifies against, so
// a Resolution assembled by hand cannot be opened.
type Resolution struct {
	// Path is the final path: absolute, clean and free of symbolic links
	// at the time of the walk. When Exists is false it is the path that
	// would exist: the resolved existing part joined with the missing
	// components.
	Path string

	// Visited lists every path the walk touched, in order: "/", each
	// directory or file reached, each symbolic link, and each link's
	// target as the link spells it (joined with the link's directory and
	// cleaned lexically). Recording the spelled target may make a check
	// refuse more than the kernel would reach; it never makes it refuse
	// less. Paths may repeat.
	Visited []string

	// Exists reports whether Path existed when it was walked. A dangling
	// link, or a missing component, gives Exists == false and no error.
	Exists bool

	steps []step
	final fs.FileInfo // Lstat of Path when Exists; nil otherwise
}

type stepKind uint8

const (
	stepEntry  stepKind = iota // a directory or file the walk reached
	stepLink                   // a symbolic link the walk followed
	stepTarget                 // a link's target, as the link spells it
	stepAbsent                 // a path that did not exist
)

// step is one entry of Resolution.Visited with what the walk knew about it.
type step struct {
	path   string
	kind   stepKind
	target string      // raw link text, for stepLink
	fi     fs.FileInfo // Lstat result, for stepEntry and stepLink
}

// Resolve walks p from / one component at a time, the way the kernel
// resolves a path: it Lstats each component, and on a symbolic link reads it
// and continues with the target's components (from / for an absolute target,
// from the link's directory for a relative one). A ".." after a link goes to
// the parent of the directory the link led to, not to the lexical parent. At
// most 40 links are followed; the 41st gives an error wrapping
// [syscall.ELOOP].
//
// p must be absolute and clean ([filepath.Clean] leaves it unchanged);
// otherwise the error wraps [fs.ErrInvalid]. A component that does not exist
// (including the target of a dangling link) ends the walk with Exists ==
// false and a nil error, unless a ".." would have to be applied to it, which
// the kernel refuses too (error wrapping [fs.ErrNotExist]). A non-directory
// followed by further components gives an error wrapping [syscall.ENOTDIR].
// Other Lstat and Readlink errors (EACCES) are returned wrapped, with the
// errno kept.
//
// The result describes the file system at the time of the walk. Binding by
// the path string afterwards is racy; use [Resolution.Open] to pin the inode.
//
// Resolve remembers nothing; [Resolver.Resolve] shares one memo across the
// walks of a plan.
func Resolve(p string) (Resolution, error) {
	return (*Resolver)(nil).Resolve(p)
}

// checkPath refuses a path that is not absolute and clean.
func checkPath(p string) error {
	if !strings.HasPrefix(p, "/") || filepath.Clean(p) != p {
		return fmt.Errorf("pathguard: %q is not an absolute, clean path: %w", p, fs.ErrInvalid)
	}
	return nil
}

func (r *Resolution) add(s step) {
	r.steps = append(r.steps, s)
	r.Visited = append(r.Visited, s.path)
}

// pushComponents pushes the components of target onto the stack todo so that
// the first component is popped first. Empty components are dropped; a
// trailing slash becomes a "." so that it still requires a directory, as it
// does for the kernel.
func pushComponents(todo []string, target string) []string {
	if strings.HasSuffix(target, "/") && strings.Trim(target, "/") != "" {
		todo = append(todo, ".")
	}
	for end := len(target); end > 0; {
		start := strings.LastIndexByte(target[:end], '/') + 1
		if start < end {
			todo = append(todo, target[start:end])
		}
		end = start - 1
	}
	return todo
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// walk does the work of Resolve on a checked path, through rv's memo (nil:
// none). Errors are returned bare
// (Resolve adds the context); their errno is kept.
func walk(rv *Resolver, p string) (Resolution, error) {
	var r Resolution
	rootFi, err := rv.lstat("/")
	if err != nil {
		return r, err
	}
	r.add(step{path: "/", kind: stepEntry, fi: rootFi})

	cur, curFi := "/", rootFi
	todo := pushComponents(make([]string, 0, 8), p)
	links := 0
	for len(todo) > 0 {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		switch name {
		case ".":
			continue // cur is always a directory here
		case "..":
			cur, curFi = filepath.Dir(cur), nil
			continue
		}
		next := join(cur, name)
		fi, err := rv.lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return absent(r, next, todo)
		}
		if err != nil {
			return r, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			links++
			if links > maxSymlinks {
				return r, &fs.PathError{Op: "follow", Path: next, Err: syscall.ELOOP}
			}
			target, err := rv.readlink(next)
			if err != nil {
				return r, err
			}
			if target == "" {
				return r, &fs.PathError{Op: "follow", Path: next, Err: syscall.ENOENT}
			}
			r.add(step{path: next, kind: stepLink, target: target, fi: fi})
			spelled := target
			if !strings.HasPrefix(target, "/") {
				spelled = join(cur, target)
			} else {
				cur, curFi = "/", rootFi
			}
			r.add(step{path: filepath.Clean(spelled), kind: stepTarget})
			todo = pushComponents(todo, target)
			continue
		}
		r.add(step{path: next, kind: stepEntry, fi: fi})
		if !fi.IsDir() && len(todo) > 0 {
			return r, &fs.PathError{Op: "walk", Path: next, Err: syscall.ENOTDIR}
		}
		cur, curFi = next, fi
	}
	if curFi == nil { // the walk ended on a ".."
		if curFi, err = rv.lstat(cur); err != nil {
			return r, err
		}
	}
	r.Path, r.Exists, r.final = cur, true, curFi
	return r, nil
}

// absent ends a walk at the missing path next, with the components still on
// the stack todo appended lexically.
func absent(r Resolution, next string, todo []string) (Resolution, error) {
	r.add(step{path: next, kind: stepAbsent})
	final := next
	for i := len(todo) - 1; i >= 0; i-- {
		switch todo[i] {
		case ".":
		case "..":
			return r, &fs.PathError{Op: "walk", Path: next, Err: syscall.ENOENT}
		default:
			final = join(final, todo[i])
		}
	}
	if final != next {
		r.add(step{path: final, kind: stepAbsent})
	}
	r.Path, r.Exists = final, false
	return r, nil
}

// inside reports whether p is dir or lies below it, comparing whole
// components: /a/bc is not inside /a/b. Both must be absolute and clean.
func inside(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, dir) && (len(p) == len(dir) || p[len(dir)] == '/')
}
