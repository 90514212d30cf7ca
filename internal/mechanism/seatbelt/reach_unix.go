//go:build darwin || linux

package seatbelt

import (
	"fmt"
	"path/filepath"

	"github.com/sandbox-run/sandbox-run/internal/fault"
)

// fileOwner is what reachableAs reads of a file: its permission bits and
// owner. statOwner reads it from the file system; tests pass fakes.
type fileOwner struct {
	mode     uint32 // permission bits
	uid, gid int
}

// allows reports whether uid/gid hold every bit of want (4 read, 2 write,
// 1 search) on f, from the mode bits alone.
func (f fileOwner) allows(uid, gid int, want uint32) bool {
	bits := f.mode
	switch {
	case f.uid == uid:
		bits >>= 6
	case f.gid == gid:
		bits >>= 3
	}
	return bits&want == want
}

// reachableAs checks, from mode bits, that uid/gid can search every
// directory above p and, when write is set, write p itself. The macOS
// runner uses it as root, where the command runs as an unprivileged uid:
// a path that uid cannot reach (a launchd TMPDIR, /var/folders/.../T, is
// 0700 and its owner's alone) would otherwise fail inside the sandbox with
// a bare "Permission denied", or not at all until the command touched it.
// ACLs are not read: a directory that only an ACL opens is refused.
func reachableAs(p string, uid, gid int, write bool, stat func(string) (fileOwner, error)) error {
	for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
		f, err := stat(dir)
		if err != nil {
			return &fault.Error{What: "cannot inspect " + dir, Why: err.Error(), Fix: "check the path"}
		}
		if !f.allows(uid, gid, 1) {
			return &fault.Error{
				What: fmt.Sprintf("%s is not reachable for uid %d", p, uid),
				Why:  fmt.Sprintf("sandbox-run runs as root, so the sandbox runs as uid %d, which cannot search %s (mode %04o)", uid, dir, f.mode),
				Fix:  fmt.Sprintf("chmod o+x %s, or pass --user with a uid that can", dir),
			}
		}
		if dir == "/" || dir == "." {
			break
		}
	}
	if !write {
		return nil
	}
	f, err := stat(p)
	if err != nil {
		return &fault.Error{What: "cannot inspect " + p, Why: err.Error(), Fix: "pass a directory that exists"}
	}
	if !f.allows(uid, gid, 3) {
		return &fault.Error{
			What: fmt.Sprintf("%s is not writable for uid %d", p, uid),
			Why:  fmt.Sprintf("sandbox-run runs as root, so the sandbox runs as uid %d, never as host root", uid),
			Fix:  fmt.Sprintf("chown -R %d:%d %s, or pass --user UID[:GID] of the directory's owner", uid, gid, p),
		}
	}
	return nil
}
