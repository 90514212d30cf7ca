package connbroker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// soNetnsCookie is SO_NETNS_COOKIE (Linux 5.14): a socket's network
// namespace, as a number no namespace reuses.
const soNetnsCookie = 71

// program is the filter: connect(2) of the native architecture goes to
// the listener, every other call passes to the filters below (bwrap's,
// which kills a foreign architecture and x32).
func program() []unix.SockFilter {
	return []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4}, // seccomp_data.arch
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 0, K: nativeArch},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_CONNECT},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_USER_NOTIF},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
}

// Install puts the filter on the calling thread, which must be locked
// (runtime.LockOSThread) and must be the one that then executes the
// command, and sends its listener on sock, with a socket of the calling
// thread's network namespace (which names the namespace to Serve). It
// needs no_new_privs (bwrap sets it) and Linux 5.19
// (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV: once sandbox-run holds a
// connect, only a fatal signal interrupts it, so the command never sees
// an EINTR for a connection sandbox-run made). On an error after the
// filter is on, the caller must not execute the command: its connects
// would wait for a listener nobody serves.
func Install(sock int) error {
	if nativeArch == 0 {
		return errors.New("connbroker: not built for this architecture")
	}
	prog := program()
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	lfd, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER|unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, uintptr(unsafe.Pointer(&fp)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return &NotInstalledError{Err: fmt.Errorf("seccomp user notification: %w", errno)}
	}
	defer unix.Close(int(lfd))
	probe, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(probe)
	return unix.Sendmsg(sock, []byte{'L'}, unix.UnixRights(int(lfd), probe), nil, 0)
}

// NotInstalledError is Install's error when the filter did not go on
// (another filter of the process already has a listener, as in some
// container runtimes; or a kernel without the flags): the command may
// still run, with its connections on the netstack's path, once Decline
// has told the launcher why.
type NotInstalledError struct{ Err error }

func (e *NotInstalledError) Error() string { return e.Err.Error() }
func (e *NotInstalledError) Unwrap() error { return e.Err }

// Decline tells the launcher on sock that no listener comes, and why.
func Decline(sock int, why error) error {
	return unix.Sendmsg(sock, append([]byte{'N'}, why.Error()...), nil, nil, 0)
}

// DeclinedError is Receive's error when the command's shim declined
// (Decline): Why is its reason.
type DeclinedError struct{ Why string }

func (e *DeclinedError) Error() string { return "connect brokering not installed: " + e.Why }

// Supported says whether this kernel can broker connects: seccomp user
// notification with SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19,
// which also has pidfd_getfd and SO_NETNS_COOKIE), on an architecture
// the filter knows. It installs nothing: the kernel checks the flags
// before it reads the program, here missing (EFAULT: the flags passed).
func Supported() error {
	if nativeArch == 0 {
		return errors.New("connect brokering is not built for this architecture")
	}
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER|unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, 0)
	if errno != unix.EFAULT {
		return fmt.Errorf("this kernel has no seccomp user notification that waits killably (Linux 5.19 and later): %v", errno)
	}
	return nil
}

// Listener is the launcher's end of a command's filter.
type Listener struct {
	f      *os.File
	rc     syscall.RawConn
	cookie uint64 // the sandbox's network namespace
}

// ErrNoListener is Receive's error when the command started without
// handing over a listener (its shim failed, or never ran).
var ErrNoListener = errors.New("connbroker: no listener was handed over")

// Receive reads what Install sent on sock, which it closes, waiting
// until it comes, the other end closes (ErrNoListener) or ctx ends.
func Receive(ctx context.Context, sock *os.File) (*Listener, error) {
	sock, err := pollable(sock)
	if err != nil {
		return nil, err
	}
	defer sock.Close()
	stop := context.AfterFunc(ctx, func() { sock.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	rc, err := sock.SyscallConn()
	if err != nil {
		return nil, err
	}
	oob := make([]byte, unix.CmsgSpace(2*4))
	var buf [512]byte
	var n, oobn int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf[:], oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	// What came is ours to close, even if ctx ended meanwhile: the
	// listener then serves nothing (Serve returns at once).
	return listenerOf(buf[:n], parseRights(oob[:oobn]))
}

// pollable closes f and returns a non-blocking copy of its descriptor,
// which Go's poller waits for (so that a deadline ends the wait).
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	nfd, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	if err := unix.SetNonblock(nfd, true); err != nil {
		unix.Close(nfd)
		return nil, err
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}

// listenerOf makes the Listener of Install's message msg and its
// descriptors fds (which it owns).
func listenerOf(msg []byte, fds []int) (*Listener, error) {
	if len(msg) > 0 && msg[0] == 'N' && len(fds) == 0 {
		return nil, &DeclinedError{Why: string(msg[1:])}
	}
	if len(msg) != 1 || msg[0] != 'L' || len(fds) != 2 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, ErrNoListener
	}
	defer unix.Close(fds[1])
	cookie, err := unix.GetsockoptUint64(fds[1], unix.SOL_SOCKET, soNetnsCookie)
	if err != nil {
		unix.Close(fds[0])
		return nil, fmt.Errorf("connbroker: the sandbox's network namespace: %w", err)
	}
	// Non-blocking, so that Go's poller waits for its notifications (and
	// for the hang-up when no process uses the filter any more).
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		return nil, err
	}
	f := os.NewFile(uintptr(fds[0]), "seccomp-listener")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Listener{f: f, rc: rc, cookie: cookie}, nil
}

// parseRights is every descriptor in oob's SCM_RIGHTS messages.
func parseRights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

// Close closes the listener: a connect waiting on it fails (ENOSYS).
func (l *Listener) Close() error { return l.f.Close() }
