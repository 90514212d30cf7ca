package connbroker

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Config is what Serve asks of the launcher.
type Config struct {
	// Dial judges a connection to dst and, when allowed, connects it from
	// the host, bound first to an explicit port, and returns the
	// connected socket (Serve closes it once the command has its copy).
	// Its error is what the command's connect fails with: a
	// syscall.Errno in its chain as that errno, anything else (a
	// refusal) as ECONNREFUSED, as the netstack's reset would.
	Dial func(ctx context.Context, dst netip.AddrPort) (*os.File, error)
	// Inside says whether an address is the sandbox's own (its TUN
	// network, where the resolver answers): connected as asked, in the
	// sandbox's namespace, never brokered. Loopback addresses always are.
	Inside func(netip.Addr) bool
	Logger *slog.Logger
}

// seccomp_notif, seccomp_notif_resp and seccomp_notif_addfd
// (linux/seccomp.h).
type notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

type notifAddFD struct {
	ID         uint64
	Flags      uint32
	SrcFD      uint32
	NewFD      uint32
	NewFDFlags uint32
}

const (
	ioctlNotifIDValid = 0x40082102 // SECCOMP_IOCTL_NOTIF_ID_VALID
	ioctlNotifAddFD   = 0x40182103 // SECCOMP_IOCTL_NOTIF_ADDFD
	sockaddrMax       = 128        // sizeof(struct sockaddr_storage): the kernel's own bound
)

// maxAnswering bounds the connects answered at once: a blocking one
// holds a thread of sandbox-run's while it waits, and a command of many
// threads must not exhaust them. The rest wait in the kernel's queue.
const maxAnswering = 256

// Serve answers the command's connects until ctx ends or no process
// uses the filter any more, then closes the listener. Each connect is
// answered in a goroutine of its own (a blocking one waits there), at
// most maxAnswering at once.
func (l *Listener) Serve(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	stop := context.AfterFunc(ctx, func() { l.f.Close() })
	defer stop()
	defer l.f.Close()
	rc := l.rc
	slots := make(chan struct{}, maxAnswering)
	for {
		var n notif
		var hup bool
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			k, perr := unix.Poll(pfd, 0)
			for perr == unix.EINTR { // a signal (Go's preemption) is no hang-up
				k, perr = unix.Poll(pfd, 0)
			}
			if perr != nil || k == 0 {
				return false // wait in Go's poller
			}
			if pfd[0].Revents&unix.POLLIN == 0 {
				hup = true // no process left that uses the filter
				return true
			}
			rerr = ioctlPtr(fd, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n))
			return true
		})
		switch {
		case err != nil || hup:
			return nil // closed (ctx ended) or orphaned
		case rerr != nil:
			continue // the process went away before we took it (ENOENT), or a signal
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		go func() {
			defer func() { <-slots }()
			l.answer(ctx, cfg, n)
		}()
	}
}

// answer decides n and sends the kernel the outcome.
func (l *Listener) answer(ctx context.Context, cfg Config, n notif) {
	errno := l.decide(ctx, cfg, &n)
	r := notifResp{ID: n.ID}
	if errno != 0 {
		r.Val, r.Error = -1, -int32(errno)
	}
	_ = l.ioctl(unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&r))
}

// decide performs the connect of n and returns its errno (0: connected).
func (l *Listener) decide(ctx context.Context, cfg Config, n *notif) unix.Errno {
	if n.Nr != unix.SYS_CONNECT {
		return unix.ENOSYS
	}
	t, errno := l.take(n)
	if errno != 0 {
		return errno
	}
	defer t.close()
	cookie, err := unix.GetsockoptUint64(t.fd, unix.SOL_SOCKET, soNetnsCookie)
	switch {
	case errors.Is(err, unix.ENOTSOCK):
		return unix.ENOTSOCK
	case err != nil || cookie != l.cookie:
		// A socket of the host (brokered, or passed in by the caller):
		// never disconnected, never pointed anywhere.
		cfg.Logger.Debug("connbroker: connect on a socket of another network namespace refused", "pid", n.Pid)
		return unix.EPERM
	}
	if dst, ok := brokerable(cfg, t); ok {
		return l.broker(ctx, cfg, n, t, dst)
	}
	return t.connect()
}

// taken is a connect's socket and address, copied out of the process.
type taken struct {
	tid  int
	fd   int    // sandbox-run's copy of the process's descriptor
	addr []byte // the sockaddr, read once
}

func (t *taken) close() { unix.Close(t.fd) }

// pidfdThread is PIDFD_THREAD (Linux 6.9): a pidfd of a thread, not
// only of a process's leader.
const pidfdThread = unix.O_EXCL

// threadPidfd is a pidfd through which thread tid's descriptors can be
// taken: the thread's own (Linux 6.9), else its process's.
func threadPidfd(tid int) (int, error) {
	fd, err := unix.PidfdOpen(tid, pidfdThread)
	if !errors.Is(err, unix.EINVAL) {
		return fd, err
	}
	tgid, err := tgidOf(tid)
	if err != nil {
		return -1, err
	}
	return unix.PidfdOpen(tgid, 0)
}

// take copies n's socket (pidfd_getfd) and address (process_vm_readv),
// checking after each step that n is still the waiting call, so that
// neither came from another process that reused its pid.
func (l *Listener) take(n *notif) (*taken, unix.Errno) {
	t := &taken{tid: int(n.Pid)}
	pidfd, err := threadPidfd(t.tid)
	if err != nil {
		return nil, unix.ESRCH
	}
	defer unix.Close(pidfd)
	if !l.valid(n.ID) {
		return nil, unix.ESRCH
	}
	if t.fd, err = unix.PidfdGetfd(pidfd, int(int32(n.Args[0])), 0); err != nil {
		return nil, unix.EBADF
	}
	size := int32(uint32(n.Args[2])) // an int, as the kernel reads it
	if size < 0 || size > sockaddrMax {
		t.close()
		return nil, unix.EINVAL
	}
	t.addr = make([]byte, size)
	if size > 0 {
		iov := []unix.Iovec{{Base: &t.addr[0], Len: uint64(size)}}
		got, err := unix.ProcessVMReadv(t.tid, iov, []unix.RemoteIovec{{Base: uintptr(n.Args[1]), Len: int(size)}}, 0)
		if err != nil || got != int(size) {
			t.close()
			return nil, unix.EFAULT
		}
	}
	if !l.valid(n.ID) {
		t.close()
		return nil, unix.ESRCH
	}
	return t, 0
}

// valid says whether notification id still waits for its answer.
func (l *Listener) valid(id uint64) bool {
	return l.ioctl(ioctlNotifIDValid, unsafe.Pointer(&id)) == nil
}

// connect connects sandbox-run's copy of the socket to the copied
// address, as the process asked: in the socket's own network namespace,
// with the socket's own blocking mode.
func (t *taken) connect() unix.Errno {
	if path, ok := unixPath(t.addr); ok {
		return t.connectUnixPath(path)
	}
	var p unsafe.Pointer
	if len(t.addr) > 0 {
		p = unsafe.Pointer(&t.addr[0])
	}
	for {
		_, _, errno := unix.Syscall(unix.SYS_CONNECT, uintptr(t.fd), uintptr(p), uintptr(len(t.addr)))
		if errno != unix.EINTR {
			return errno
		}
	}
}

// brokerable says whether t is a TCP connect the host may make in the
// process's place, and to where: an inet socket of the address's family,
// not bound, to a port of an address outside the sandbox.
func brokerable(cfg Config, t *taken) (netip.AddrPort, bool) {
	dst, ok := inetAddr(t.addr)
	if !ok || dst.Port() == 0 {
		return dst, false
	}
	a := dst.Addr()
	if a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() || a.Is4In6() || (cfg.Inside != nil && cfg.Inside(a)) {
		return dst, false
	}
	family := unix.AF_INET
	if a.Is6() {
		family = unix.AF_INET6
	}
	for _, o := range [][2]int{{unix.SO_DOMAIN, family}, {unix.SO_TYPE, unix.SOCK_STREAM}, {unix.SO_PROTOCOL, unix.IPPROTO_TCP}} {
		if v, err := unix.GetsockoptInt(t.fd, unix.SOL_SOCKET, o[0]); err != nil || v != o[1] {
			return dst, false
		}
	}
	sa, err := unix.Getsockname(t.fd)
	if err != nil {
		return dst, false
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return dst, sa.Port == 0
	case *unix.SockaddrInet6:
		return dst, sa.Port == 0
	}
	return dst, false
}

// inetAddr parses an AF_INET or AF_INET6 sockaddr.
func inetAddr(b []byte) (netip.AddrPort, bool) {
	if len(b) < 2 {
		return netip.AddrPort{}, false
	}
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		if len(b) >= unix.SizeofSockaddrInet4 {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:])), true
		}
	case unix.AF_INET6:
		if len(b) >= unix.SizeofSockaddrInet6 && binary.NativeEndian.Uint32(b[24:]) == 0 { // no scope
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), binary.BigEndian.Uint16(b[2:])), true
		}
	}
	return netip.AddrPort{}, false
}

// broker dials dst from the host and puts the connected socket in place
// of the process's descriptor.
func (l *Listener) broker(ctx context.Context, cfg Config, n *notif, t *taken, dst netip.AddrPort) unix.Errno {
	f, err := cfg.Dial(ctx, dst)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return errno
		}
		return unix.ECONNREFUSED
	}
	defer f.Close()
	fd := int(f.Fd()) // once: Fd puts the file in blocking mode, which carryOptions then sets
	if err := carryOptions(t.fd, fd); err != nil {
		cfg.Logger.Warn("connbroker: cannot carry the socket's options over", "err", err)
		return unix.ECONNREFUSED
	}
	a := notifAddFD{ID: n.ID, Flags: unix.SECCOMP_ADDFD_FLAG_SETFD, SrcFD: uint32(fd), NewFD: uint32(n.Args[0])}
	if cloexec(t.tid, int(n.Args[0])) {
		a.NewFDFlags = unix.O_CLOEXEC
	}
	if err := l.ioctl(ioctlNotifAddFD, unsafe.Pointer(&a)); err != nil {
		return unix.ECONNREFUSED // the process is gone, or its table full
	}
	return 0
}

// carryOptions gives the host's socket to the process's blocking mode
// and its TCP_NODELAY and SO_KEEPALIVE.
func carryOptions(from, to int) error {
	fl, err := unix.FcntlInt(uintptr(from), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	tfl, err := unix.FcntlInt(uintptr(to), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if _, err := unix.FcntlInt(uintptr(to), unix.F_SETFL, tfl&^unix.O_NONBLOCK|fl&unix.O_NONBLOCK); err != nil {
		return err
	}
	for _, o := range [][2]int{{unix.IPPROTO_TCP, unix.TCP_NODELAY}, {unix.SOL_SOCKET, unix.SO_KEEPALIVE}} {
		v, err := unix.GetsockoptInt(from, o[0], o[1])
		if err == nil {
			err = unix.SetsockoptInt(to, o[0], o[1], v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ioctl is an ioctl on the listener, through Go's poller (never Fd,
// which would take the listener out of it).
func (l *Listener) ioctl(req uint, arg unsafe.Pointer) error {
	var err error
	if cerr := l.rc.Control(func(fd uintptr) { err = ioctlPtr(fd, req, arg) }); cerr != nil {
		return cerr
	}
	return err
}

func ioctlPtr(fd uintptr, req uint, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, uintptr(req), uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}
