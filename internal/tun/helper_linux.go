package tun

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
)

// HelperAttr is the part of the helper's SysProcAttr that makes its
// namespaces: a new user namespace in which only uid and gid are mapped
// (to themselves), a new network namespace owned by it, and, raised as
// ambient capabilities so that they survive the helper's execve, exactly
// CAP_NET_ADMIN (the device, the route, lo), CAP_SETPCAP (to drop the
// bounding set), CAP_SYS_RESOURCE (the namespace's inotify ceiling), and
// for root CAP_SETUID and CAP_SETGID (to become uid and
// gid: root's uid 0 is not mapped in the namespace, so the helper keeps
// host uid 0 only as the owner of root's files, /dev/net/tun among them,
// until it takes uid and gid). The capabilities hold in the new user
// namespace only, never in the host's. setgroups stays denied in the
// namespace unless root writes the maps (root then clears its groups).
func HelperAttr(uid, gid int, root bool) *syscall.SysProcAttr {
	caps := []uintptr{unix.CAP_NET_ADMIN, unix.CAP_SETPCAP, unix.CAP_SYS_RESOURCE}
	if root {
		caps = append(caps, unix.CAP_SETUID, unix.CAP_SETGID)
	}
	return &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: root,
		AmbientCaps:                caps,
	}
}

// HelperMain is the helper (HelperArg), started with HelperAttr and
// Helper.Args. In its new network namespace it brings lo up and makes the
// device, and in its user namespace it sets h.Inotify (a ceiling it
// cannot set is named in its message, and bwrap still starts); then it
// takes h.UID and h.GID, drops every capability
// (bounding, ambient, inheritable, permitted, effective), re-arms its
// parent-death signal, sends the device's descriptor on h.Sock and
// executes h.Argv (bwrap) with an empty environment. bwrap, without
// --unshare-net, keeps this namespace: it holds lo and the device, and
// nothing in the sandbox has a capability over it (its owner is this
// user namespace, the sandbox's is bwrap's nested one).
//
// Any failure before the execve is sent as a LostError and ends the
// helper with status 3, bwrap never started, so that the launcher starts
// bwrap the plain way; a failed execve ends it with 125 and the reason on
// standard error (bwrap's, which the launcher holds).
func HelperMain(args []string) int {
	runtime.LockOSThread() // the thread whose credentials execve keeps
	h, err := parseHelper(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-run: network namespace helper:", err)
		return exitcode.Setup
	}
	unix.CloseOnExec(h.Sock)
	ppid := os.Getppid()
	dev, inotifyErr, err := prepareHelper(h, ppid)
	if err != nil {
		unix.Sendmsg(h.Sock, []byte("lost: "+err.Error()), nil, nil, 0)
		return 3
	}
	msg := "ok"
	if inotifyErr != nil {
		msg += " " + inotifyNotSet + inotifyErr.Error()
	}
	err = unix.Sendmsg(h.Sock, []byte(msg), unix.UnixRights(int(dev.Fd())), nil, 0)
	dev.Close()
	unix.Close(h.Sock)
	if err != nil {
		return 3
	}
	err = unix.Exec(h.Argv[0], h.Argv, []string{})
	fmt.Fprintf(os.Stderr, "sandbox-run: cannot execute %s: %v\n", h.Argv[0], err)
	return exitcode.Setup
}

// inotifyNotSet prefixes, in the helper's "ok" message, why the inotify
// ceiling could not be set.
const inotifyNotSet = "inotify ceiling not set: "

// prepareHelper makes lo and the device, sets the inotify ceiling, then
// leaves every privilege behind; the device's descriptor is returned only
// when the device and the drop succeeded, and inotifyErr says why the
// ceiling could not be set.
func prepareHelper(h Helper, ppid int) (dev *os.File, inotifyErr, err error) {
	if err := LoopbackUp(); err != nil {
		return nil, nil, err
	}
	dev, err = Make(h.Device)
	if err != nil {
		return nil, nil, err
	}
	inotifyErr = setInotify(h.Inotify)
	if err := dropPrivileges(h, ppid); err != nil {
		dev.Close()
		return nil, nil, err
	}
	return dev, inotifyErr, nil
}

// setInotify writes c to the user.max_inotify_* sysctls of the calling
// process's user namespace (proc answers those for the reader's own
// namespace; writing needs CAP_SYS_RESOURCE in it) and reads them back.
// A zero c sets nothing.
func setInotify(c Inotify) error {
	if c == (Inotify{}) {
		return nil
	}
	for _, s := range []struct {
		name string
		v    int64
	}{{"max_inotify_instances", c.Instances}, {"max_inotify_watches", c.Watches}} {
		p := "/proc/sys/user/" + s.name
		want := strconv.FormatInt(s.v, 10)
		if err := os.WriteFile(p, []byte(want), 0); err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(string(b)); got != want {
			return fmt.Errorf("%s reads back as %s, not %s", p, got, want)
		}
	}
	return nil
}

// dropPrivileges empties the bounding set (while CAP_SETPCAP is held),
// takes h's ids, clears the ambient set and the thread's capability sets,
// and sets the parent-death signal again (a change of ids clears it),
// failing if the parent is already gone.
func dropPrivileges(h Helper, ppid int) error {
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			return fmt.Errorf("drop the bounding set: %w", err)
		}
	}
	if h.SetGroups {
		if err := syscall.Setgroups([]int{}); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
	}
	if err := syscall.Setresgid(h.GID, h.GID, h.GID); err != nil {
		return fmt.Errorf("setresgid %d: %w", h.GID, err)
	}
	if err := syscall.Setresuid(h.UID, h.UID, h.UID); err != nil {
		return fmt.Errorf("setresuid %d: %w", h.UID, err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear the ambient set: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	if os.Getppid() != ppid {
		return errors.New("the launcher is gone")
	}
	return nil
}

// Receive reads the helper's one message from c: the device's
// descriptor, or a *LostError with the helper's reason. A helper that
// ends, or says nothing before deadline, is an error too. With the
// device, inotifyLost says why the helper could not set the inotify
// ceiling it was asked for (empty: it was set, or none was asked).
func Receive(c *net.UnixConn, deadline time.Time) (dev *os.File, inotifyLost string, err error) {
	c.SetReadDeadline(deadline)
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, "", fmt.Errorf("the network namespace helper did not answer: %w", err)
	}
	msg := string(buf[:n])
	if rest, ok := strings.CutPrefix(msg, "ok "+inotifyNotSet); ok {
		msg, inotifyLost = "ok", rest
	}
	var fds []int
	if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, cm := range cms {
			if rights, err := unix.ParseUnixRights(&cm); err == nil {
				fds = append(fds, rights...)
			}
		}
	}
	if msg != "ok" || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		if len(msg) > 6 && msg[:6] == "lost: " {
			return nil, "", &LostError{Why: msg[6:]}
		}
		return nil, "", fmt.Errorf("the network namespace helper said %q", msg)
	}
	unix.CloseOnExec(fds[0])
	return os.NewFile(uintptr(fds[0]), "tun"), inotifyLost, nil
}
