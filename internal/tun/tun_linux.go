package tun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrPermission is wrapped when the caller may not enter the namespace.
var ErrPermission = errors.New("tun: entering the sandbox's network namespace needs CAP_SYS_ADMIN in the host's user namespace")

// Open enters the network namespace of process pid from a locked OS
// thread (which is then discarded, never returned to the scheduler in the
// sandbox's namespace), creates the TUN device cfg names (IFF_TUN |
// IFF_NO_PI, and IFF_VNET_HDR if asked), gives it its address and MTU, brings it up, adds the default
// route through it, and returns its descriptor (close-on-exec).
func Open(pid int, cfg Config) (*os.File, error) {
	if !cfg.Addr.Addr().Is4() || cfg.Name == "" || cfg.MTU < 576 {
		return nil, fmt.Errorf("tun: bad config %+v", cfg)
	}
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, back, err := openIn(pid, cfg)
		if back {
			runtime.UnlockOSThread()
		}
		// Otherwise never unlocked: the thread ends with this goroutine,
		// so no other goroutine ever runs in the sandbox's namespace.
		ch <- result{f, err}
	}()
	r := <-ch
	return r.f, r.err
}

// openIn makes the device in pid's network namespace from the calling
// (locked) thread, and takes the thread back to its own namespace: back
// says it is there. Why back: a locked goroutine that ends on the
// process's main thread does not end that thread, and its namespace is
// then the one /proc/self/ns/net names for the whole process (the
// report's namespace checks compare the sandbox's with it).
func openIn(pid int, cfg Config) (_ *os.File, back bool, _ error) {
	own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, fmt.Errorf("tun: open sandbox-run's network namespace: %w", err)
	}
	defer unix.Close(own)
	ns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, fmt.Errorf("tun: open the sandbox's network namespace: %w", err)
	}
	defer unix.Close(ns)
	if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, true, fmt.Errorf("%w (%v)", ErrPermission, err)
		}
		return nil, true, fmt.Errorf("tun: enter the sandbox's network namespace: %w", err)
	}
	f, err := Make(cfg)
	return f, unix.Setns(own, unix.CLONE_NEWNET) == nil, err
}

// Make creates the TUN device cfg names (IFF_TUN | IFF_NO_PI) in the
// network namespace of the calling thread, gives it its address and MTU,
// brings it up, adds the default route through it when cfg.Route is set,
// and returns its descriptor (close-on-exec, non-blocking). It needs
// CAP_NET_ADMIN over that namespace and read-write access to
// /dev/net/tun; the device lives as long as the descriptor.
func Make(cfg Config) (*os.File, error) {
	if !cfg.Addr.Addr().Is4() || cfg.Name == "" || cfg.MTU < 576 {
		return nil, fmt.Errorf("tun: bad config %+v", cfg)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("tun: open /dev/net/tun: %w", err)
	}
	f := os.NewFile(uintptr(fd), "tun:"+cfg.Name)
	ifr, err := unix.NewIfreq(cfg.Name)
	if err == nil {
		ifr.SetUint16(deviceFlags(cfg))
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	}
	if err == nil {
		err = configure(cfg)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tun: %s: %w", cfg.Name, err)
	}
	return f, nil
}

// LoopbackUp brings lo up in the calling thread's network namespace (a
// new namespace has it down), as bwrap does for the namespaces it makes.
func LoopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("tun: bring lo up: %w", err)
	}
	return nil
}

// deviceFlags are TUNSETIFF's flags for cfg.
func deviceFlags(cfg Config) uint16 {
	f := uint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if cfg.VnetHdr {
		f |= unix.IFF_VNET_HDR
	}
	return f
}

// configure sets the address, netmask, MTU and up flag by ioctl, and the
// default route by netlink, in the current thread's network namespace.
func configure(cfg Config) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	set := func(req uint, fill func(*unix.Ifreq) error) error {
		ifr, err := unix.NewIfreq(cfg.Name)
		if err != nil {
			return err
		}
		if err := fill(ifr); err != nil {
			return err
		}
		return unix.IoctlIfreq(s, req, ifr)
	}
	mask := netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, ^uint32(0)<<(32-cfg.Addr.Bits()))))
	steps := []struct {
		req  uint
		fill func(*unix.Ifreq) error
	}{
		{unix.SIOCSIFADDR, func(r *unix.Ifreq) error { return r.SetInet4Addr(cfg.Addr.Addr().AsSlice()) }},
		{unix.SIOCSIFNETMASK, func(r *unix.Ifreq) error { return r.SetInet4Addr(mask.AsSlice()) }},
		{unix.SIOCSIFMTU, func(r *unix.Ifreq) error { r.SetUint32(uint32(cfg.MTU)); return nil }},
		{unix.SIOCSIFFLAGS, func(r *unix.Ifreq) error { r.SetUint16(unix.IFF_UP | unix.IFF_RUNNING); return nil }},
	}
	for _, st := range steps {
		if err := set(st.req, st.fill); err != nil {
			return fmt.Errorf("ioctl %#x: %w", st.req, err)
		}
	}
	if !cfg.Route {
		return nil
	}
	ifr, err := unix.NewIfreq(cfg.Name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFINDEX, ifr); err != nil {
		return fmt.Errorf("interface index: %w", err)
	}
	return defaultRoute(int(ifr.Uint32()))
}

// defaultRoute adds 0.0.0.0/0 through interface index ifindex (no
// gateway: every packet is the device's) by one RTM_NEWROUTE.
func defaultRoute(ifindex int) error {
	nl, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(nl)
	// struct rtmsg: family, dst_len, src_len, tos, table, protocol,
	// scope, type, then 32 bits of flags.
	rt := []byte{unix.AF_INET, 0, 0, 0, unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RT_SCOPE_LINK, unix.RTN_UNICAST, 0, 0, 0, 0}
	attr := make([]byte, 8)
	binary.NativeEndian.PutUint16(attr[0:], 8)
	binary.NativeEndian.PutUint16(attr[2:], unix.RTA_OIF)
	binary.NativeEndian.PutUint32(attr[4:], uint32(ifindex))
	body := append(rt, attr...)
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.SizeofNlMsghdr+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], unix.RTM_NEWROUTE)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	msg = append(msg, body...)
	if err := unix.Sendto(nl, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("route: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(nl, buf, 0)
	if err != nil {
		return fmt.Errorf("route: %w", err)
	}
	// The acknowledgement: a header, then struct nlmsgerr's error.
	if n < unix.SizeofNlMsghdr+4 || binary.NativeEndian.Uint16(buf[4:]) != unix.NLMSG_ERROR {
		return fmt.Errorf("route: unexpected netlink reply (%d bytes)", n)
	}
	if e := int32(binary.NativeEndian.Uint32(buf[unix.SizeofNlMsghdr:])); e != 0 {
		return fmt.Errorf("route: %w", unix.Errno(-e))
	}
	return nil
}
