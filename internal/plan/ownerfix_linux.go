package plan

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/fault"
)

// notWritableFix is the fix for a writable directory p that the
// sandbox's uid/gid cannot write, when sandbox-run is root: run as its
// owner when that is not root (the exact --user), else hand it over.
func notWritableFix(p string, uid, gid int) string {
	owner, group := -1, -1
	if fi, err := os.Stat(p); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			owner, group = int(st.Uid), int(st.Gid)
		}
	}
	return ownerFix(p, uid, gid, owner, group)
}

// notLendable rewrites notWritableFix's fix in err for a writable
// directory that is not the workdir: --map-owner lends the workdir only.
func notLendable(err error, p string, uid, gid int) error {
	var se *fault.Error
	if errors.As(err, &se) && se.Fix == notWritableFix(p, uid, gid) {
		se.Fix = fmt.Sprintf("chown -R %d:%d %s (--map-owner lends the workdir only), or pass --user UID[:GID] of its owner", uid, gid, p)
	}
	return err
}

// ownerFix is notWritableFix given p's owner and group (-1: unknown).
func ownerFix(p string, uid, gid, owner, group int) string {
	if owner > 0 {
		return fmt.Sprintf("pass --user %d:%d (the directory's owner), or chown -R %d:%d %s", owner, group, uid, gid, p)
	}
	chown := fmt.Sprintf("chown -R %d:%d %s", uid, gid, p)
	if owner == 0 {
		return fmt.Sprintf("pass --map-owner (the command still runs as uid %d; its writes there are stored as root's, set-ID bits refused), or %s", uid, chown)
	}
	return chown + ", or pass --user UID[:GID] of the directory's owner"
}
