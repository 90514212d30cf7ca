package seatbelt

import "syscall"

// statOwner reads a fileOwner from the file system (the macOS runner's
// stat for reachableAs).
func statOwner(p string) (fileOwner, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return fileOwner{}, err
	}
	return fileOwner{mode: uint32(st.Mode) & 0o777, uid: int(st.Uid), gid: int(st.Gid)}, nil
}
