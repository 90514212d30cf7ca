//go:build darwin || linux

package plan

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandbox-run/sandbox-run/pathguard"
)

// ownDir returns policy.Host.Own for a caller whose own directories are
// owned by one of owners: the effective uid, and when sandbox-run is root
// the uid the sandbox runs as (its workdir must be that uid's to be
// writable inside). A directory is the caller's alone when it is a real
// directory (not a link), owned by one of them and writable by no group
// and no one else: then no other user or service can put a socket in it.
// An absolute, clean dir is looked up through rv, the plan's memo.
func ownDir(rv *pathguard.Resolver, owners ...int) func(string) error {
	return func(dir string) error {
		var fi fs.FileInfo
		var err error
		if filepath.IsAbs(dir) && filepath.Clean(dir) == dir {
			fi, err = rv.Lstat(dir)
		} else {
			fi, err = os.Lstat(dir)
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("not a directory but %s", kindOf(fi.Mode()))
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("cannot read its owner")
		}
		mine := false
		for _, o := range owners {
			mine = mine || int(st.Uid) == o
		}
		switch {
		case !mine:
			return fmt.Errorf("owned by uid %d", st.Uid)
		case fi.Mode().Perm()&0o022 != 0 || fi.Mode()&fs.ModeSticky != 0:
			return fmt.Errorf("mode %s: others may write it", fi.Mode())
		}
		return nil
	}
}

// HostOwn is ownDir for this process and policy uid (the sandbox's when
// root), through rv.
func HostOwn(rv *pathguard.Resolver, sandboxUID int) func(string) error {
	euid := os.Geteuid()
	if euid == 0 {
		return ownDir(rv, euid, sandboxUID)
	}
	return ownDir(rv, euid)
}

func kindOf(m fs.FileMode) string {
	if m&fs.ModeSymlink != 0 {
		return "a symbolic link"
	}
	return "a file of mode " + m.String()
}
