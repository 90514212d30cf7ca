//go:build unix

package wrap

import (
	"io/fs"
	"os"
	"syscall"
)

// chown gives f like's owner when it differs (root wrapping a user's
// file must leave it the user's).
func chown(f *os.File, like fs.FileInfo) error {
	st, ok := like.Sys().(*syscall.Stat_t)
	if !ok || (int(st.Uid) == os.Geteuid() && int(st.Gid) == os.Getegid()) {
		return nil
	}
	return f.Chown(int(st.Uid), int(st.Gid))
}
