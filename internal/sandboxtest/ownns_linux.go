package sandboxtest

import (
	"os"
	"syscall"
)

// OwnUserNS returns process attributes that start a command in a new user
// namespace whose uid and gid map to the caller's own, one to one, or nil
// as root.
//
// A small RLIMIT_NPROC set in the host's user namespace counts every task
// of the caller's uid on the host: as an unprivileged user that includes
// the go command and the test binaries of other packages running in
// parallel, so the outcome would depend on the machine's load. In a user
// namespace of its own the limit counts that namespace's tasks only (Linux
// 5.14 and later), which is also how sandbox-run's sandboxes are counted.
// Root is exempt from RLIMIT_NPROC in its own namespace and sets a
// credential instead.
func OwnUserNS() *syscall.SysProcAttr {
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		return nil
	}
	return &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: false,
	}
}
