package connbroker

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// unixPath is the path of an AF_UNIX sockaddr that names one (not an
// abstract or unnamed address).
func unixPath(b []byte) (string, bool) {
	if len(b) <= 2 || binary.NativeEndian.Uint16(b) != unix.AF_UNIX || b[2] == 0 {
		return "", false
	}
	p := b[2:]
	if i := bytes.IndexByte(p, 0); i >= 0 {
		p = p[:i]
	}
	return string(p), true
}

// connectUnixPath connects the socket to path as the process would: the
// path resolved in the process's root (an absolute one, symlinks
// included, never above it) or beneath its working directory (a relative
// one), by a thread that holds the process's file-system ids, so that
// the socket's permissions are checked against the process, not
// sandbox-run. The thread is never unlocked: Go ends it with the
// goroutine, ids and all.
func (t *taken) connectUnixPath(path string) unix.Errno {
	done := make(chan unix.Errno, 1)
	go func() {
		runtime.LockOSThread()
		done <- t.connectUnixLocked(path)
	}()
	return <-done
}

func (t *taken) connectUnixLocked(path string) unix.Errno {
	base, resolve := "root", uint64(unix.RESOLVE_IN_ROOT)
	if !strings.HasPrefix(path, "/") {
		base, resolve = "cwd", unix.RESOLVE_BENEATH
	}
	dir, err := unix.Open(fmt.Sprintf("/proc/%d/%s", t.tid, base), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return unix.EACCES
	}
	defer unix.Close(dir)
	if err := takeIDs(t.tid); err != nil {
		return unix.EACCES
	}
	fd, err := unix.Openat2(dir, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolve | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		if errno, ok := err.(unix.Errno); ok {
			if errno == unix.EXDEV { // out of bounds: as if it were not there
				return unix.ENOENT
			}
			return errno
		}
		return unix.ENOENT
	}
	defer unix.Close(fd)
	var sa unix.RawSockaddrUnix
	sa.Family = unix.AF_UNIX
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	for i := range len(proc) {
		sa.Path[i] = int8(proc[i])
	}
	for {
		_, _, errno := unix.Syscall(unix.SYS_CONNECT, uintptr(t.fd), uintptr(unsafe.Pointer(&sa)), uintptr(2+len(proc)+1))
		if errno != unix.EINTR {
			return errno
		}
	}
}

// takeIDs gives the calling thread the file-system uid and gid and the
// supplementary groups of task tid (as this process's namespace sees
// them). Unprivileged they are sandbox-run's own already: only root
// changes them (which also drops its file-system capabilities).
func takeIDs(tid int) error {
	if os.Geteuid() != 0 {
		return nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return err
	}
	uid, gid, groups, err := fsIDs(b)
	if err != nil {
		return err
	}
	// The raw calls change this thread alone (libc and Go's syscall
	// package would change every thread).
	var gp unsafe.Pointer
	if len(groups) > 0 {
		gp = unsafe.Pointer(&groups[0])
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(gp), 0); errno != 0 {
		return errno
	}
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(gid), 0, 0)
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(uid), 0, 0)
	// setfs[ug]id return the old id whether or not they changed it: ask
	// again (an invalid id changes nothing and returns the current one).
	nowGID, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0)
	nowUID, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
	if uint32(nowUID) != uid || uint32(nowGID) != gid {
		return fmt.Errorf("connbroker: the thread did not take fsuid %d fsgid %d", uid, gid)
	}
	return nil
}

// fsIDs reads the fsuid, fsgid (the fourth of the Uid and Gid lines) and
// the groups of a /proc/PID/status text.
func fsIDs(status []byte) (uid, gid uint32, groups []uint32, err error) {
	var got int
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		switch k {
		case "Uid", "Gid":
			if len(f) != 4 {
				return 0, 0, nil, fmt.Errorf("connbroker: bad %s line %q", k, line)
			}
			n, err := strconv.ParseUint(f[3], 10, 32)
			if err != nil {
				return 0, 0, nil, err
			}
			if k == "Uid" {
				uid = uint32(n)
			} else {
				gid = uint32(n)
			}
			got++
		case "Groups":
			for _, g := range f {
				n, err := strconv.ParseUint(g, 10, 32)
				if err != nil {
					return 0, 0, nil, err
				}
				groups = append(groups, uint32(n))
			}
		}
	}
	if got != 2 {
		return 0, 0, nil, fmt.Errorf("connbroker: no Uid and Gid lines")
	}
	return uid, gid, groups, nil
}

// tgidOf is the thread group (process) of thread tid.
func tgidOf(tid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("connbroker: no Tgid in /proc/%d/status", tid)
}

// cloexec says whether descriptor fd of thread tid is close-on-exec
// (its fdinfo flags, octal), so that the socket put in its place is too.
// Unreadable: yes, the safer guess.
func cloexec(tid, fd int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", tid, fd))
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			fl, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err != nil || fl&unix.O_CLOEXEC != 0
		}
	}
	return true
}
