package gitrepo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Git's own rules for finding a repository, as the host's git applies
// them when the user runs it in a directory the command wrote (setup.c:
// setup_git_directory_gently_1, read_gitfile_gently, is_git_directory,
// get_common_dir_noenv, validate_headref), with none of git's
// environment variables set: GIT_DIR, GIT_COMMON_DIR,
// GIT_OBJECT_DIRECTORY, GIT_CEILING_DIRECTORIES and
// GIT_DISCOVERY_ACROSS_FILESYSTEM change what git finds and are not
// modelled.
//
// Resolving follows links as git does (a gitdir: line or a commondir
// through a link and "..", a HEAD that is a link): the kernel resolves
// each path (realPath), never a lexical clean of it. Reading to decide
// may so go anywhere the link points, to decide only: every file read is
// opened non-blocking, checked to be a regular file and read to a bound.
// Acting (the caller's quarantine, writing what StripConfig keeps) is
// never done here: the caller acts on the real paths returned, and only
// on those inside a writable directory, each reached from that directory
// by descriptor without following a link (sandbox's openParent), so a
// link swapped in after the decision makes the action fail, never land
// outside.

// Repo is one repository as host git opens it: Dir is its git
// directory ($GIT_DIR) and Common its common directory ($GIT_COMMON_DIR:
// Dir itself unless Dir/commondir names another), both real paths as
// they resolved when read (a later rename or link swap is not seen). Git
// reads config and hooks from Common, config.worktree from Dir.
type Repo struct {
	Dir, Common string
}

// Listing looks a name up in a directory's entries as a walk listed them
// (getdents, no link followed): whether name is there, and its file type
// bits. At and HasNames look up only the names git looks for. It is a
// func, not an interface, so that passing a listing's method value costs
// no allocation per directory.
type Listing func(name string) (fs.FileMode, bool)

// gitSubmoduleDepth bounds gitDirs' descent into submodules of
// submodules.
const gitSubmoduleDepth = 8

// gitDirs returns every repository a host git run in dir (as `git
// status` there) reads config or hooks from: the one git's discovery finds
// from dir upwards (dir/.git as a directory or a "gitdir:" file, else dir
// itself as a git directory, else the same at each parent, stopping at a
// file system boundary as git does), then, through the gitlinks of its
// index (submodules, whether or not .gitmodules names them), each
// populated submodule's repository, recursively (gitSubmoduleDepth).
// Paths are real; some may lie outside the writable directories (the
// caller acts only on those inside). Nothing found is no repository (git
// there would find none, or stop on a malformed .git file).
//
// The error is non-nil when the answer may be incomplete: an index that
// could not be read whole, submodules nested deeper than the bound; what
// was found is returned with it, and a caller guarding the host treats
// the rest as unknown.
//
// The sweep (hostwalk.FindGit) applies the same rules (At) at every directory
// of the writable trees, which covers what gitDirs returns for any
// directory inside them (TestGitDirsAgreesWithGit checks both).
func gitDirs(dir string) ([]Repo, error) {
	start, err := realPath(dir)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Stat(start, &st); err != nil {
		return nil, err
	}
	for cur := start; ; {
		r, found, stop := discoverAt(cur)
		if found {
			out := []Repo{r}
			if r.Dir != cur {
				// A worktree (cur/.git): git status recurses into its
				// submodules. A bare repository has none checked out.
				more, err := submoduleRepos(cur, r, 1)
				return append(out, more...), err
			}
			return out, nil
		}
		if stop || cur == "/" {
			return nil, nil
		}
		parent := cur[:strings.LastIndexByte(cur, '/')]
		if parent == "" {
			parent = "/"
		}
		var pst unix.Stat_t
		if unix.Stat(parent, &pst) != nil || pst.Dev != st.Dev {
			return nil, nil // git stops at a mount point
		}
		cur = parent
	}
}

// discoverAt is one step of git's discovery at dir (a real path): dir/.git
// first (a "gitdir:" file, or a directory that is a git directory), then
// dir itself as a git directory (bare). stop says git gives up there: a
// .git file it cannot use makes git fail, not look further up.
func discoverAt(dir string) (r Repo, found, stop bool) {
	dotgit := dir + "/.git"
	var st unix.Stat_t
	if err := unix.Stat(dotgit, &st); err == nil {
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			g, err := ReadGitfile(dotgit)
			if err != nil {
				return Repo{}, false, true
			}
			return repoOf(g), true, false
		}
		if isGitDirectory(dotgit) {
			if g, err := realPath(dotgit); err == nil {
				return repoOf(g), true, false
			}
		}
	}
	if isGitDirectory(dir) {
		return repoOf(dir), true, false
	}
	return Repo{}, false, false
}

// At returns the repositories git may open at dir itself (a real
// path, listed as ents), for a walk that lists every directory below: a
// .git file (or link) resolved as git resolves it, and dir itself when
// git takes it for a git directory (bare, a submodule's or a worktree's
// git directory, which a "gitdir:" line elsewhere may name). A .git
// directory is left to its own listing, where it is dir. Both count,
// whatever git's discovery would pick first, since a gitdir: line can name
// dir whatever dir/.git is. ents spares the system calls for a directory
// that has none of the names git looks for.
func At(dir string, ents Listing) []Repo {
	var out []Repo
	if m, ok := ents(".git"); ok && !m.IsDir() {
		dotgit := dir + "/.git"
		var st unix.Stat_t
		if unix.Stat(dotgit, &st) == nil {
			if st.Mode&unix.S_IFMT == unix.S_IFREG {
				if g, err := ReadGitfile(dotgit); err == nil {
					out = append(out, repoOf(g))
				}
			} else if isGitDirectory(dotgit) {
				if g, err := realPath(dotgit); err == nil {
					out = append(out, repoOf(g))
				}
			}
		}
	}
	if HasNames(ents) && isGitDirectory(dir) {
		out = append(out, repoOf(dir))
	}
	return out
}

// HasNames says a directory's entries have the names git needs of a git
// directory: HEAD (a file or a link), and objects and refs or a commondir
// naming where they are. It is the cheap half of git's rule, which At
// completes with isGitDirectory; the live guard takes it alone, since a
// directory git init is still filling (an empty HEAD) must be watched as a
// git directory before git would accept it.
func HasNames(ents Listing) bool {
	_, head := ents("HEAD")
	_, refs := ents("refs")
	_, objects := ents("objects")
	_, commondir := ents("commondir")
	return head && (commondir || refs && objects)
}

// repoOf is the repository whose git directory is g (a real path).
func repoOf(g string) Repo {
	if c, err := CommonDir(g); err == nil {
		return Repo{Dir: g, Common: c}
	}
	return Repo{Dir: g, Common: g}
}

// ReadGitfile reads a .git file as read_gitfile_gently does and returns
// the real path of the git directory it names: the file starts with
// "gitdir: ", the rest up to trailing CRs and LFs (a NUL ends it) is the
// path, relative to the file's directory unless absolute, joined as text
// and resolved by the kernel (so "link/.." is the link's target's parent,
// not the file's directory); it must be a git directory.
func ReadGitfile(file string) (string, error) {
	b, err := ReadBounded(file, 1<<20, false)
	if err != nil {
		return "", err
	}
	rest, ok := bytes.CutPrefix(b, []byte("gitdir: "))
	if !ok {
		return "", fmt.Errorf("%s: no gitdir: line", file)
	}
	if rest = bytes.TrimRight(rest, "\r\n"); len(rest) == 0 {
		return "", fmt.Errorf("%s: empty gitdir: line", file)
	}
	// Git reads the path as a C string: a NUL ends it, and an empty one
	// names the file's own directory.
	if i := bytes.IndexByte(rest, 0); i >= 0 {
		rest = rest[:i]
	}
	t := string(rest)
	if !strings.HasPrefix(t, "/") {
		t = file[:strings.LastIndexByte(file, '/')+1] + t
	}
	if !isGitDirectory(t) {
		return "", fmt.Errorf("%s: %s is not a git directory", file, t)
	}
	return realPath(t)
}

// isGitDirectory is git's is_git_directory: suspect/HEAD is a valid HEAD
// (validHead), and the common directory (CommonDir) holds objects and
// refs that the caller may search (access X_OK, links followed, as git
// checks them).
func isGitDirectory(suspect string) bool {
	if !validHead(strings.TrimSuffix(suspect, "/") + "/HEAD") {
		return false
	}
	common := suspect
	if _, err := os.Stat(suspect + "/commondir"); err == nil {
		c, err := CommonDir(suspect)
		if err != nil {
			return false // git dies reading it
		}
		common = c
	}
	return unix.Access(common+"/objects", unix.X_OK) == nil && unix.Access(common+"/refs", unix.X_OK) == nil
}

// validHead is git's validate_headref: a link whose target starts with
// "refs/", or a file holding "ref: refs/..." or an object name. A HEAD that
// is no regular file is refused (git would block on a FIFO).
func validHead(p string) bool {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil {
		return false
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		t, err := os.Readlink(p)
		return err == nil && strings.HasPrefix(t, "refs/")
	}
	b, err := ReadBounded(p, 255, true)
	if err != nil {
		return false
	}
	if ref, ok := bytes.CutPrefix(b, []byte("ref:")); ok {
		return bytes.HasPrefix(bytes.TrimLeft(ref, " \t\n\v\f\r"), []byte("refs/"))
	}
	return isObjectName(b)
}

// isObjectName says whether b starts with a full SHA-1 or SHA-256 object
// name in hex, as git's get_oid_hex_any accepts one (what follows it is
// not looked at).
func isObjectName(b []byte) bool {
	for _, n := range []int{64, 40} {
		if len(b) >= n && isHex(b[:n]) {
			return true
		}
	}
	return false
}

func isHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// CommonDir is git's get_common_dir_noenv: the real path of what
// g/commondir names (trailing CRs and LFs dropped, relative to g), or g
// when there is no commondir. An error means git would die.
func CommonDir(g string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(g+"/commondir", &st); err != nil {
		return g, nil
	}
	b, err := ReadBounded(g+"/commondir", 1<<16, false)
	if err != nil {
		return "", err
	}
	if len(b) == 0 {
		return "", fmt.Errorf("%s/commondir is empty", g) // git dies
	}
	b = bytes.TrimRight(b, "\r\n")
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	t := string(b)
	if !strings.HasPrefix(t, "/") {
		t = g + "/" + t
	}
	return realPath(t)
}

// realPath is the kernel's resolution of p, every link followed and ".."
// taken after the link before it, as git's real_path gets it: the path of
// an O_PATH descriptor (which opens nothing: no FIFO blocks, no device
// acts).
func realPath(p string) (string, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	r, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(r, "/") || strings.HasSuffix(r, " (deleted)") {
		return "", fmt.Errorf("%s resolves to %q, not a path", p, r)
	}
	return r, nil
}

// ReadBounded reads a regular file, links followed, to at most max bytes;
// a larger one is an error unless prefix (then its first max bytes are
// what git reads too). It opens without blocking (a FIFO does not hold
// it) and refuses anything but a regular file.
func ReadBounded(p string, max int64, prefix bool) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max && prefix {
		return b[:max], nil
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w (over %d bytes)", p, errTooLarge, max)
	}
	return b, nil
}

// errTooLarge: a file git reads is larger than sandbox-run reads.
var errTooLarge = errors.New("too large to read")
