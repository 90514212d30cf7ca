package connbroker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// The command side of these tests is this test binary again: the
// "install" helper puts the filter on (as the exec shim does) and
// becomes the "act" helper, which makes the connects its ACT variable
// names and prints one line per result. It runs in a user and network
// namespace of its own (no interface up, as in a sandbox), so a
// connection that reaches anything did so through the broker.

const actEnv = "CONNBROKER_ACT"

func helpers() map[string]func() int {
	return map[string]func() int{"install": installHelper, "act": actHelper}
}

func installHelper() int {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("install:", err)
		return 1
	}
	if err := Install(3); err != nil {
		fmt.Println("install:", err)
		return 1
	}
	unix.Close(3)
	// syscall.Exec keeps duplicates, and the first wins: drop ours.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, sandboxtest.HelperEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, sandboxtest.HelperEnv+"=act")
	err := syscall.Exec("/proc/self/exe", os.Args[:1], env)
	fmt.Println("exec:", err)
	return 1
}

// actHelper runs the steps of $CONNBROKER_ACT, separated by ";": each
// "VERB ARG..." prints "VERB RESULT" (ok, or the errno's name).
func actHelper() int {
	var conns []net.Conn
	for _, step := range strings.Split(os.Getenv(actEnv), ";") {
		f := strings.Fields(step)
		fmt.Println(f[0], act(f, &conns))
	}
	return 0
}

func act(f []string, conns *[]net.Conn) string {
	switch f[0] {
	case "dial": // dial ADDR: connect, read the greeting line
		c, err := net.DialTimeout("tcp", f[1], 5*time.Second)
		if err != nil {
			return errName(err)
		}
		*conns = append(*conns, c)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return errName(err)
		}
		return "ok " + strings.TrimSpace(line)
	case "dialthread": // the same from a thread other than the main one
		done := make(chan string)
		go func() { runtime.LockOSThread(); done <- act([]string{"dial", f[1]}, conns) }()
		return <-done
	case "unspec": // connect(AF_UNSPEC) on the last connection
		return rawConnect(last(*conns), &unix.RawSockaddrAny{Addr: unix.RawSockaddr{Family: unix.AF_UNSPEC}}, 16)
	case "reconnect": // connect the last connection to ADDR
		ap := netip.MustParseAddrPort(f[1])
		var any unix.RawSockaddrAny // the larger type, seen as the smaller
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&any))
		sa.Family, sa.Addr = unix.AF_INET, ap.Addr().As4()
		sa.Port = uint16(ap.Port()>>8) | uint16(ap.Port()&0xff)<<8
		return rawConnect(last(*conns), &any, unix.SizeofSockaddrInet4)
	case "bindafterclose": // read the last connection to its end, close our side, bind to port PORT
		return bindAfterClose(last(*conns), f[1])
	case "fd": // connect(AF_UNSPEC) on descriptor N (inherited)
		n, _ := strconv.Atoi(f[1])
		c, err := net.FileConn(os.NewFile(uintptr(n), "inherited"))
		if err != nil {
			return errName(err)
		}
		return rawConnect(c, &unix.RawSockaddrAny{Addr: unix.RawSockaddr{Family: unix.AF_UNSPEC}}, 16)
	case "race": // swap the last connection in and out of one slot while disconnecting the slot, N times
		n, _ := strconv.Atoi(f[1])
		return race(last(*conns), n)
	case "chroot":
		if err := unix.Chroot(f[1]); err != nil {
			return errName(err)
		}
		return errName(unix.Chdir("/"))
	case "unix": // connect to the Unix socket PATH, read the greeting
		c, err := net.DialTimeout("unix", f[1], 5*time.Second)
		if err != nil {
			return errName(err)
		}
		defer c.Close()
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return errName(err)
		}
		return "ok " + strings.TrimSpace(line)
	}
	return "unknown step " + f[0]
}

func last(cs []net.Conn) net.Conn {
	if len(cs) == 0 {
		return nil
	}
	return cs[len(cs)-1]
}

func rawConnect(c net.Conn, sa *unix.RawSockaddrAny, size uintptr) string {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return "no connection"
	}
	rc, _ := sc.SyscallConn()
	var errno syscall.Errno
	_ = rc.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall(unix.SYS_CONNECT, fd, uintptr(unsafe.Pointer(sa)), size)
	})
	return errName(errno)
}

// race is the attack a kernel that continued a checked connect would
// lose to: one thread keeps swapping the connection's socket and a fresh
// socket of the sandbox in and out of one descriptor slot, while another
// disconnects that slot (connect with AF_UNSPEC) up to n times. It says
// whether the connection is still connected (getpeername) at the end.
func race(c net.Conn, n int) string {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return "no connection"
	}
	f, err := tc.File()
	if err != nil {
		return errName(err)
	}
	defer f.Close()
	mine, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return errName(err)
	}
	defer unix.Close(mine)
	slot, err := unix.Dup(mine)
	if err != nil {
		return errName(err)
	}
	defer unix.Close(slot)
	done, started := make(chan struct{}), make(chan struct{})
	var stop atomic.Bool
	host := int(f.Fd())
	go func() {
		defer close(done)
		runtime.LockOSThread() // a thread of its own, running beside the connects
		for i := 0; !stop.Load(); i++ {
			src := mine
			if i%2 == 0 {
				src = host
			}
			_ = unix.Dup3(src, slot, unix.O_CLOEXEC)
			if i == 2 {
				close(started)
			}
		}
	}()
	<-started
	unspec := unix.RawSockaddrAny{Addr: unix.RawSockaddr{Family: unix.AF_UNSPEC}}
	tries := 0
	for tries < n {
		tries++
		unix.Syscall(unix.SYS_CONNECT, uintptr(slot), uintptr(unsafe.Pointer(&unspec)), 16)
		if _, err := unix.Getpeername(host); err != nil {
			break // disconnected: the attack won
		}
	}
	stop.Store(true)
	<-done
	if _, err := unix.Getpeername(int(f.Fd())); err != nil {
		return fmt.Sprintf("disconnected after %d", tries)
	}
	return "connected"
}

func bindAfterClose(c net.Conn, port string) string {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return "no connection"
	}
	buf := make([]byte, 64)
	for {
		if _, err := tc.Read(buf); err != nil {
			break
		}
	}
	_ = tc.CloseWrite()
	time.Sleep(200 * time.Millisecond) // the last ACK: the socket is closed
	p, _ := strconv.Atoi(port)
	rc, _ := tc.SyscallConn()
	var err error
	_ = rc.Control(func(fd uintptr) { err = unix.Bind(int(fd), &unix.SockaddrInet4{Port: p}) })
	return errName(err)
}

func errName(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno) && errno == 0:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	}
	return "error " + err.Error()
}

// broker runs ACT under the filter, served with cfg, and returns its
// lines. extra descriptors are inherited from fd 4 on.
func broker(t *testing.T, cfg Config, steps string, extra ...*os.File) []string {
	t.Helper()
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	child := os.NewFile(uintptr(sp[1]), "broker-child")
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), sandboxtest.HelperEnv+"=install", actEnv+"="+steps)
	cmd.ExtraFiles = append([]*os.File{child}, extra...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		child.Close()
		unix.Close(sp[0])
		sandboxtest.Unavailable(t, "a user and network namespace", err.Error())
	}
	child.Close()
	l, err := Receive(context.Background(), os.NewFile(uintptr(sp[0]), "broker"))
	if err != nil {
		_ = cmd.Wait()
		t.Fatalf("receive: %v (child: %s)", err, out.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- l.Serve(ctx, cfg) }()
	werr := cmd.Wait()
	cancel()
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
	if werr != nil {
		t.Fatalf("act: %v: %s", werr, out.String())
	}
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

// unconfined runs the same steps with no filter, in this process's
// network namespace: the control.
func unconfined(t *testing.T, steps string, extra ...*os.File) []string {
	t.Helper()
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), sandboxtest.HelperEnv+"=act", actEnv+"="+steps)
	cmd.ExtraFiles = append([]*os.File{nil}, extra...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unconfined act: %v: %s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// upstream is a greeting server on 127.0.0.1 that counts its
// connections; outside is the address the command dials for it (a
// documentation address, routed nowhere: only the broker's Dial knows
// it).
type upstream struct {
	addr    netip.AddrPort
	outside netip.AddrPort
	conns   atomic.Int64
}

func newUpstream(t *testing.T, greeting string, closeAfter bool) *upstream {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{addr: ln.Addr().(*net.TCPAddr).AddrPort()}
	u.outside = netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), u.addr.Port())
	sandboxtest.Serve(t, ln, func(c net.Conn) {
		u.conns.Add(1)
		fmt.Fprintln(c, greeting)
		if closeAfter {
			return
		}
		buf := make([]byte, 1)
		_, _ = c.Read(buf)
	})
	return u
}

// allow is a Config whose Dial allows u.outside only, connecting it to
// u.addr, bound with BindPort; dials counts the calls.
func allow(u *upstream, dials *atomic.Int64) Config {
	return Config{Dial: func(ctx context.Context, dst netip.AddrPort) (*os.File, error) {
		dials.Add(1)
		if dst != u.outside {
			return nil, errors.New("refused by the test's policy")
		}
		d := net.Dialer{Control: func(network, _ string, c syscall.RawConn) error { return LocalPorts().Bind(network, c) }}
		c, err := d.DialContext(ctx, "tcp4", u.addr.String())
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return c.(*net.TCPConn).File()
	}}
}

func want(t *testing.T, got []string, lines ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(lines, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(lines, "\n"))
	}
}

func TestBrokerConnectsAllowedOnly(t *testing.T) {
	u := newUpstream(t, "hello", false)
	var dials atomic.Int64
	refused := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.2"), u.addr.Port())
	got := broker(t, allow(u, &dials), fmt.Sprintf("dial %s;dialthread %s;dial %s", u.outside, u.outside, refused))
	want(t, got, "dial ok hello", "dialthread ok hello", "dial ECONNREFUSED")
	if n := u.conns.Load(); n != 2 {
		t.Errorf("the upstream saw %d connections, want 2 (the refused one must not reach it)", n)
	}
	// Control: without the broker the same command, in a namespace of its
	// own, reaches nothing.
	c := exec.Command("/proc/self/exe")
	c.Env = append(os.Environ(), sandboxtest.HelperEnv+"=act", actEnv+"=dial "+u.outside.String())
	c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}}
	out, err := c.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "dial ENETUNREACH") {
		t.Errorf("control: unbrokered, in an empty namespace, the dial gave %q (%v), want ENETUNREACH", out, err)
	}
}

func TestBrokerNeverLoopback(t *testing.T) {
	u := newUpstream(t, "host loopback", false)
	var dials atomic.Int64
	cfg := allow(u, &dials)
	cfg.Dial = func(ctx context.Context, dst netip.AddrPort) (*os.File, error) {
		dials.Add(1)
		return nil, errors.New("not asked")
	}
	got := broker(t, cfg, "dial "+u.addr.String())
	want(t, got, "dial ENETUNREACH") // the sandbox's own loopback: down here
	if dials.Load() != 0 || u.conns.Load() != 0 {
		t.Errorf("a loopback connect was brokered (%d dials, %d connections)", dials.Load(), u.conns.Load())
	}
	// Control: the host's loopback service is there.
	want(t, unconfined(t, "dial "+u.addr.String()), "dial ok host loopback")
}

func TestBrokeredSocketStaysConnected(t *testing.T) {
	u := newUpstream(t, "hello", false)
	var dials atomic.Int64
	got := broker(t, allow(u, &dials), fmt.Sprintf("dial %s;unspec;reconnect %s", u.outside, u.addr))
	want(t, got, "dial ok hello", "unspec EPERM", "reconnect EPERM")
	if n := u.conns.Load(); n != 1 {
		t.Errorf("the upstream saw %d connections, want 1", n)
	}
	// Control: a host socket of one's own disconnects.
	want(t, unconfined(t, "dial "+u.addr.String()+";unspec"), "dial ok host loopback"[:0]+"dial ok hello", "unspec ok")
}

func TestBrokerRefusesHostSockets(t *testing.T) {
	u := newUpstream(t, "hello", false)
	c, err := net.Dial("tcp4", u.addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var dials atomic.Int64
	want(t, broker(t, allow(u, &dials), "fd 4", f), "fd EPERM")
	// Control: unconfined, the inherited host socket can be disconnected
	// (and then pointed anywhere).
	want(t, unconfined(t, "fd 4", f), "fd ok")
}

func TestBrokeredPortStaysBound(t *testing.T) {
	u := newUpstream(t, "bye", true)
	free := freePort(t)
	var dials atomic.Int64
	got := broker(t, allow(u, &dials), fmt.Sprintf("dial %s;bindafterclose %d", u.outside, free))
	want(t, got, "dial ok bye", "bindafterclose EINVAL")
	// Control: a host socket connected the ordinary way gets its port
	// back when its connection ends, and can then be bound to any.
	want(t, unconfined(t, fmt.Sprintf("dial %s;bindafterclose %d", u.addr, free)), "dial ok bye", "bindafterclose ok")
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestBrokerUnixPathInRoot(t *testing.T) {
	dir := t.TempDir()
	root, host := filepath.Join(dir, "root"), filepath.Join(dir, "host")
	for _, d := range []string{root, host} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	greet := func(s string) func(net.Conn) { return func(c net.Conn) { fmt.Fprintln(c, s) } }
	sandboxtest.ServeUnix(t, filepath.Join(root, "in.sock"), greet("inside"))
	hostSock := sandboxtest.ServeUnix(t, filepath.Join(host, "host.sock"), greet("host"))
	// Inside the root, /link names the host's socket by its host path.
	if err := os.Symlink(hostSock, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int64
	got := broker(t, allow(&upstream{}, &dials), "chroot "+root+";unix /in.sock;unix /link;unix in.sock")
	want(t, got, "chroot ok", "unix ok inside", "unix ENOENT", "unix ok inside")
	// Control: resolved from the host (what a broker that followed the
	// link outside the root would do), the link reaches the host's socket.
	want(t, unconfined(t, "unix "+filepath.Join(root, "link")), "unix ok host")
}

func TestBrokerSwapRace(t *testing.T) {
	u := newUpstream(t, "hello", false)
	// Control first: with no broker the race disconnects a host socket
	// (the kernel acts on whatever the slot holds), after some tries.
	got := unconfined(t, fmt.Sprintf("dial %s;race 20000", u.addr))
	var tries int
	if len(got) != 2 || got[0] != "dial ok hello" {
		t.Fatalf("control: %q", got)
	}
	if _, err := fmt.Sscanf(got[1], "race disconnected after %d", &tries); err != nil {
		t.Fatalf("control: the race did not disconnect a host socket in 20000 tries (%q): untested", got[1])
	}
	// Brokered, twenty times as many tries (at least 200, at most 2000:
	// under make test-vm's emulation each takes milliseconds) leave the
	// brokered socket connected.
	n := min(max(20*tries, 200), 2000)
	var dials atomic.Int64
	want(t, broker(t, allow(u, &dials), fmt.Sprintf("dial %s;race %d", u.outside, n)), "dial ok hello", "race connected")
	t.Logf("control disconnected after %d tries; brokered held through %d", tries, n)
}
