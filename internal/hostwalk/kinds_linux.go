package hostwalk

import (
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// kindsBound is the most entries a directory may have for Kinds to list
// it; past it, each name is lstat'ed instead, so that a huge directory
// costs no more than it did before the listing.
const kindsBound = 4096

// Kinds answers LstatKind for many names in few directories: it lists
// each parent once (one open and a getdents or two) instead of an lstat
// per name. The protected names (thirty-odd per writable directory) are
// looked up when the run is planned and again when it is settled, so this
// was most of a plan's file system calls. The answers are a snapshot, as
// separate lstats are. The zero value is ready to use; a Kinds is not safe
// for concurrent use.
type Kinds struct {
	l    Lister
	dirs map[string]map[string]Kind // a nil entry: not listed
}

// Kind says what is at p, without following a link at p: from the
// listing of p's parent, or by LstatKind when the parent could not be
// listed. The answer is as of the parent's listing (or its seed), not of
// the call.
func (k *Kinds) Kind(p string) Kind {
	if kind, ok := k.Lookup(p); ok {
		return kind
	}
	return LstatKind(p)
}

// Lookup answers from the listing of p's parent; ok is false when that
// parent could not be opened without following a link at its last
// component, could not be read, or holds more than kindsBound entries.
func (k *Kinds) Lookup(p string) (Kind, bool) {
	dir, name := filepath.Split(p)
	dir = filepath.Clean(dir)
	if name == "" || dir == p {
		return KindMissing, false
	}
	if k.dirs == nil {
		k.dirs = map[string]map[string]Kind{}
	}
	names, ok := k.dirs[dir]
	if !ok {
		names = k.listDir(dir)
		k.dirs[dir] = names
	}
	if names == nil {
		return KindMissing, false
	}
	return names[name], true
}

// Seed gives k the listing ents of dir that a walk of the same plan
// already made (FindGit's tops), so that dir is not listed again: the
// same snapshot as a listing of its own, taken a moment earlier.
func (k *Kinds) Seed(dir string, ents Dirents) {
	if len(ents) > kindsBound {
		return
	}
	if k.dirs == nil {
		k.dirs = map[string]map[string]Kind{}
	}
	k.dirs[filepath.Clean(dir)] = kindsOf(ents)
}

// listDir maps the names in dir to their Kinds; nil when dir cannot be
// listed or holds more than kindsBound entries.
func (k *Kinds) listDir(dir string) map[string]Kind {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	ents, err := k.l.List(fd, kindsBound)
	if err != nil {
		return nil
	}
	return kindsOf(ents)
}

// kindsOf maps a listing's names to their Kinds.
func kindsOf(ents Dirents) map[string]Kind {
	out := make(map[string]Kind, len(ents))
	for _, e := range ents {
		switch {
		case e.Mode.IsDir():
			out[e.Name] = KindDir
		case e.Mode&fs.ModeSymlink != 0:
			out[e.Name] = KindLink
		default:
			out[e.Name] = KindFile
		}
	}
	return out
}
