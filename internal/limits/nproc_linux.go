package limits

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// NProcPerUserNS reports whether this kernel counts RLIMIT_NPROC per user
// namespace and uid (Linux 5.14 and later: ucounts). Only then does the
// limit, set inside a sandbox's own user namespace, count the sandbox's
// tasks and nothing else: before 5.14 it counts every task of the uid on
// the host (the caller's other processes, other sandboxes run as the same
// uid), which is no per-sandbox limit at all.
func NProcPerUserNS() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return releaseAtLeast(unix.ByteSliceToString(u.Release[:]), 5, 14)
}

// releaseAtLeast compares the "major.minor" at the start of a kernel
// release string such as "6.1.0-13-amd64"; an unreadable one is too old.
func releaseAtLeast(release string, major, minor int) bool {
	f := strings.SplitN(release, ".", 3)
	if len(f) < 2 {
		return false
	}
	maj, err1 := strconv.Atoi(f[0])
	mi := f[1]
	if i := strings.IndexFunc(mi, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		mi = mi[:i]
	}
	min, err2 := strconv.Atoi(mi)
	if err1 != nil || err2 != nil {
		return false
	}
	return maj > major || (maj == major && min >= minor)
}
