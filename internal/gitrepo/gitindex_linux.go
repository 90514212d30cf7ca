package gitrepo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// maxIndexBytes bounds the index files gitDirs reads for gitlinks; a
// larger one makes its answer incomplete (an error), never silently short.
const maxIndexBytes = 64 << 20

// submoduleRepos returns the repositories of the submodules a `git
// status` in worktree (whose repository is r) recurses into: for each
// gitlink in r's index (and in a split index's shared part), the one git
// finds at worktree/PATH through its .git, and theirs in turn, depth
// levels down at most. Git runs a child `git status` there when PATH/.git
// leads to a git directory, whether or not .gitmodules names the module.
func submoduleRepos(worktree string, r Repo, depth int) ([]Repo, error) {
	if depth > gitSubmoduleDepth {
		return nil, fmt.Errorf("%s: submodules nested deeper than %d levels", worktree, gitSubmoduleDepth)
	}
	links, err := repoGitlinks(r.Dir)
	var out []Repo
	for _, p := range links {
		sub, rerr := realPath(worktree + "/" + p)
		if rerr != nil {
			continue
		}
		s, found, _ := discoverAt(sub)
		if !found || s.Dir == sub {
			continue // not populated: git does not recurse
		}
		out = append(out, s)
		more, merr := submoduleRepos(sub, s, depth+1)
		out = append(out, more...)
		err = errors.Join(err, merr)
	}
	return out, err
}

// repoGitlinks lists the gitlink paths of the index of the git directory
// g: g/index and, for a split index, every g/sharedindex.* (their union:
// an entry the split part deleted may be listed, never one missed).
func repoGitlinks(g string) ([]string, error) {
	files := []string{g + "/index"}
	if names, err := listNames(g); err == nil {
		for _, name := range names {
			if strings.HasPrefix(name, "sharedindex.") {
				files = append(files, g+"/"+name)
			}
		}
	}
	seen := map[string]bool{}
	var out []string
	var errs error
	for _, f := range files {
		b, err := ReadBounded(f, maxIndexBytes, false)
		if errors.Is(err, errTooLarge) {
			errs = errors.Join(errs, err)
			continue
		}
		if err != nil {
			continue // no index, or one git cannot read either
		}
		links, err := indexGitlinks(b)
		if err != nil {
			continue // git refuses a malformed index before it recurses
		}
		for _, l := range links {
			if !seen[l] {
				seen[l] = true
				out = append(out, l)
			}
		}
	}
	sort.Strings(out)
	return out, errs
}

// listNames lists the names in directory g, without following a link at
// its last component.
func listNames(g string) ([]string, error) {
	fd, err := unix.Open(g, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: g, Err: err}
	}
	f := os.NewFile(uintptr(fd), g)
	defer f.Close()
	return f.Readdirnames(-1)
}

// modeGitlink is an index entry's mode for a submodule's commit.
const modeGitlink = 0o160000

// indexGitlinks parses a git index file (versions 2, 3 and 4, SHA-1 or
// SHA-256 object names: the one under which every entry parses) and
// returns the paths of its gitlink entries.
func indexGitlinks(b []byte) ([]string, error) {
	if len(b) < 12 || string(b[:4]) != "DIRC" {
		return nil, errors.New("not a git index")
	}
	ver := binary.BigEndian.Uint32(b[4:8])
	if ver < 2 || ver > 4 {
		return nil, fmt.Errorf("git index version %d", ver)
	}
	n := binary.BigEndian.Uint32(b[8:12])
	var err error
	for _, hash := range []int{20, 32} {
		var links []string
		if links, err = indexEntries(b[12:], ver, n, hash); err == nil {
			return links, nil
		}
	}
	return nil, err
}

// indexEntries reads n entries with object names of hash bytes.
func indexEntries(b []byte, ver, n uint32, hash int) ([]string, error) {
	bad := errors.New("malformed git index entry")
	var links []string
	var prev []byte
	for i := uint32(0); i < n; i++ {
		fixed := 40 + hash + 2
		if len(b) < fixed {
			return nil, bad
		}
		mode := binary.BigEndian.Uint32(b[24:28])
		flags := binary.BigEndian.Uint16(b[40+hash:])
		if flags&0x4000 != 0 {
			if ver < 3 {
				return nil, bad
			}
			fixed += 2
		}
		if len(b) < fixed {
			return nil, bad
		}
		namelen := int(flags & 0xfff)
		rest := b[fixed:]
		var name []byte
		var used int
		if ver == 4 {
			strip, k := indexVarint(rest)
			if k == 0 || strip > uint64(len(prev)) {
				return nil, bad
			}
			end := bytes.IndexByte(rest[k:], 0)
			if end < 0 {
				return nil, bad
			}
			name = append(append([]byte(nil), prev[:len(prev)-int(strip)]...), rest[k:k+end]...)
			used = fixed + k + end + 1
		} else {
			end := bytes.IndexByte(rest, 0)
			if end < 0 {
				return nil, bad
			}
			name = rest[:end]
			used = (fixed + end + 8) &^ 7
		}
		if namelen < 0xfff && len(name) != namelen || len(name) == 0 || used > len(b) || !validIndexMode(mode) {
			return nil, bad
		}
		if mode == modeGitlink {
			links = append(links, string(name))
		}
		prev, b = name, b[used:]
	}
	return links, nil
}

// indexVarint is git's offset varint (varint.c); k is the bytes read, 0
// when malformed.
func indexVarint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v := uint64(c & 127)
	k := 1
	for c&128 != 0 {
		if k >= len(b) || k > 9 {
			return 0, 0
		}
		c = b[k]
		k++
		v = (v+1)<<7 | uint64(c&127)
	}
	return v, k
}

// validIndexMode: a regular file, a link, a gitlink or a sparse
// directory entry.
func validIndexMode(m uint32) bool {
	switch m {
	case 0o100644, 0o100755, 0o120000, modeGitlink, 0o040000:
		return true
	}
	return false
}
