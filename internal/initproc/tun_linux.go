package initproc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tunName is the device init makes for Config.Tun.
const tunName = "tun0"

// tunBuf is the relay's buffer: larger than any packet of the device
// (gVisor's TUN device has an MTU of 1500, and no ioctl changes it).
const tunBuf = 1 << 16

// ErrCapabilities marks capabilities init could not drop: the command
// is then never started.
var ErrCapabilities = errors.New("initproc: cannot drop init's capabilities")

// setUpTun serves t when set: the device, its relay, and then no
// capability left on any thread. The command never holds the capability:
// on any error the caller must not start it.
func setUpTun(t *Tun) error {
	if t == nil {
		return nil
	}
	if err := startTun(*t); err != nil {
		return err
	}
	return dropCapabilities()
}

// startTun makes t's device, connects to its packet socket and relays
// between them for the rest of init's life. It needs CAP_NET_ADMIN;
// dropCapabilities must follow before the command starts.
//
// The address is given by RTM_NEWADDR, the one way gVisor's netlink
// (runsc 20221219) configures an interface: it has no RTM_NEWROUTE and
// no SIOCSIF* ioctls, but it routes an address's prefix through its
// device, so 10.0.2.15/0 is a default route. gVisor's TUN device is up
// from its creation.
func startTun(t Tun) error {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("tun: open /dev/net/tun: %w", err)
	}
	dev := os.NewFile(uintptr(fd), tunName)
	ifr, err := unix.NewIfreq(tunName)
	if err == nil {
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	}
	if err == nil {
		err = addAddr(t)
	}
	if err != nil {
		dev.Close()
		return fmt.Errorf("tun: %s: %w", tunName, err)
	}
	c, err := net.Dial("unixpacket", t.Socket)
	if err != nil {
		dev.Close()
		return fmt.Errorf("tun: relay socket: %w", err)
	}
	go pump(c, dev)
	go pump(dev, c)
	return nil
}

// pump copies one packet per read from src to dst until either fails
// (the launcher's netstack or the device is gone: the sandbox's
// connections then fail, nothing else is reached).
func pump(dst, src interface {
	Read([]byte) (int, error)
	Write([]byte) (int, error)
}) {
	buf := make([]byte, tunBuf)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// addAddr gives tun0 the address t.Addr by one RTM_NEWADDR.
func addAddr(t Tun) error {
	ifi, err := net.InterfaceByName(tunName)
	if err != nil {
		return err
	}
	ip := t.Addr.Addr().As4()
	// struct ifaddrmsg: family, prefixlen, flags, scope, index.
	body := []byte{unix.AF_INET, byte(t.Addr.Bits()), 0, unix.RT_SCOPE_UNIVERSE, 0, 0, 0, 0}
	binary.NativeEndian.PutUint32(body[4:], uint32(ifi.Index))
	body = append(body, rtattr(unix.IFA_LOCAL, ip[:])...)
	body = append(body, rtattr(unix.IFA_ADDRESS, ip[:])...)
	return netlinkDo(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, body)
}

// rtattr is one route attribute, padded to 4 bytes.
func rtattr(typ uint16, v []byte) []byte {
	a := make([]byte, 4, 8+len(v))
	binary.NativeEndian.PutUint16(a[0:], uint16(4+len(v)))
	binary.NativeEndian.PutUint16(a[2:], typ)
	a = append(a, v...)
	for len(a)%4 != 0 {
		a = append(a, 0)
	}
	return a
}

// netlinkDo sends one rtnetlink request and reads its acknowledgement.
func netlinkDo(typ, flags uint16, body []byte) error {
	nl, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer unix.Close(nl)
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.SizeofNlMsghdr+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	msg = append(msg, body...)
	if err := unix.Sendto(nl, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(nl, buf, 0)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	// The acknowledgement: a header, then struct nlmsgerr's error.
	if n < unix.SizeofNlMsghdr+4 || binary.NativeEndian.Uint16(buf[4:]) != unix.NLMSG_ERROR {
		return fmt.Errorf("netlink: unexpected reply (%d bytes)", n)
	}
	if e := int32(binary.NativeEndian.Uint32(buf[unix.SizeofNlMsghdr:])); e != 0 {
		return fmt.Errorf("netlink: %w", unix.Errno(-e))
	}
	return nil
}

// dropCapabilities empties the effective, permitted and inheritable sets
// of every thread of init (capabilities are per thread, and the command
// is forked from any of them), then checks the process's status. It
// fails with ErrCapabilities when it cannot (a binary linked with cgo has
// no AllThreadsSyscall).
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	_, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	if e == unix.ENOTSUP {
		return fmt.Errorf("%w: sandbox-run is linked with cgo, which has no AllThreadsSyscall (build it with CGO_ENABLED=0, as make and the install docs do)", ErrCapabilities)
	}
	if e != 0 {
		return fmt.Errorf("%w: capset: %v", ErrCapabilities, e)
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCapabilities, err)
	}
	var rb Readback
	rb.ParseStatus(b)
	if rb.CapEff == "" || strings.Trim(rb.CapEff, "0") != "" {
		return fmt.Errorf("%w: CapEff is %q after capset", ErrCapabilities, rb.CapEff)
	}
	return nil
}
