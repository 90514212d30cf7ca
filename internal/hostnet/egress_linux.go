package hostnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/netstack"
	"github.com/sandbox-run/sandbox-run/report"
)

// The sandbox's side of transparent egress: its address on the TUN
// device, the resolver's address (answered by the netstack), the device's
// name and MTU. The namespace is the sandbox's own, so fixed values
// cannot collide with the host's.
var (
	TunAddr     = netip.MustParsePrefix("10.0.2.15/24")
	resolverIP  = netip.MustParseAddr("10.0.2.3")
	TunName     = "tun0"
	TunMTU      = 65520 // large packets: fewer trips through the stack per byte
	hostsInside = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tsandbox\n"
)

// Transparent is a run's Transparent egress, planned before bwrap starts
// and attached when the network namespace helper hands over the device
// (startTransparent).
type Transparent struct{}

// PlanTransparent decides whether the run gets transparent egress: with
// the built-in proxy (its allow-list is the policy the netstack asks)
// and a /dev/net/tun that the launcher may open (root, or a caller the
// device's mode lets in: udev's default rule makes it 0666). It binds the
// sandbox's resolv.conf and hosts file (bindResolver), so that every
// lookup goes to the netstack's resolver. A run without it is not refused: the report names why, and
// only the HTTP proxy variables work.
func (n *Network) PlanTransparent() error {
	if n.Proxy == nil {
		n.Egress = report.Transparent{Reason: "no allow-list with the built-in proxy: nothing may go out, or a node proxy decides"}
		return nil
	}
	if err := unix.Faccessat(unix.AT_FDCWD, "/dev/net/tun", unix.R_OK|unix.W_OK, unix.AT_EACCESS); err != nil {
		n.Egress = report.Transparent{Reason: tunUnusable(err)}
		return nil
	}
	if err := n.BindResolver(); err != nil {
		return err
	}
	n.Tun = &Transparent{}
	n.Egress = report.Transparent{Enabled: true}
	return nil
}

// BindResolver writes the sandbox's resolv.conf (the netstack's
// resolver, and nothing else) and hosts file into the runtime directory
// and binds them over /etc's.
func (n *Network) BindResolver() error {
	for name, text := range map[string]string{
		"resolv.conf": "nameserver " + resolverIP.String() + "\noptions attempts:1 timeout:2\n",
		"hosts":       hostsInside,
	} {
		path := filepath.Join(n.Dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return fault.New("cannot write the sandbox's "+name, err.Error(), "check that $TMPDIR is writable")
		}
		n.Binds = append(n.Binds, [2]string{path, "/etc/" + name})
	}
	return nil
}

// tunUnusable is the report's reason for a /dev/net/tun the launcher may
// not open, with the fix.
func tunUnusable(err error) string {
	const lost = ": only the HTTP proxy variables work"
	switch {
	case errors.Is(err, unix.ENOENT):
		return "no /dev/net/tun on this machine (modprobe tun, or mknod /dev/net/tun c 10 200 and chmod 0666 it)" + lost
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Sprintf("/dev/net/tun is not open to uid %d (chmod 0666 /dev/net/tun, as udev's default rule makes it)", os.Geteuid()) + lost
	}
	return "/dev/net/tun is not usable (" + err.Error() + ")" + lost
}

// AttachTransparent starts the netstack over the sandbox's TUN device f
// (which it owns from then on) with the built-in proxy's judgement. It
// is served before bwrap's watch opens init's gate (onReady), so the
// command's first connection finds it.
func (n *Network) AttachTransparent(f *os.File, log *slog.Logger) error {
	fd, err := dupNonblock(f)
	if err != nil {
		return fault.New("cannot use the sandbox's TUN device", err.Error(), "raise the descriptor limit")
	}
	st, err := netstack.New(n.NetstackConfig(fd, uint32(TunMTU), true, log))
	if err != nil {
		unix.Close(fd)
		return fault.New("cannot start the sandbox's netstack", err.Error(), "report this as a bug in sandbox-run")
	}
	n.stack.Store(st)
	n.Serve(st.Serve, log, "netstack")
	return nil
}

// NetstackConfig is the netstack of a run's transparent egress over the
// packet descriptor fd (a TUN device, with virtio headers when vnet, or
// gVisor's relay socket): judged by the built-in proxy, its lookups
// answered by the proxy's resolver, its connections and memory bounded
// (netstackLimits), every mechanism alike.
func (n *Network) NetstackConfig(fd int, mtu uint32, vnet bool, log *slog.Logger) netstack.Config {
	dial := n.Proxy.Transparent(n.ctx)
	n.dialer = dial
	return netstack.Config{FD: fd, MTU: mtu, VnetHdr: vnet, DNS: resolverIP,
		Dial: func(ctx context.Context, name string, dst netip.AddrPort) (net.Conn, error) {
			return dial.Dial(ctx, name, dst)
		},
		Lookup: n.Proxy.Lookup, Logger: log,
		Limits: netstackLimits(), Refused: n.netstackRefused,
	}
}

// LoseTransparent records that the device could not be made (why):
// transparent egress is lost, not the run. The command
// starts with the proxy alone, in bwrap's own empty network namespace,
// and the report says why (n.egress).
func (n *Network) LoseTransparent(why string, log *slog.Logger) error {
	n.Egress = report.Transparent{Reason: "the sandbox's TUN device could not be made (" + why + "): only the HTTP proxy variables work"}
	log.Warn("transparent egress lost", "why", why)
	return nil
}

// dupNonblock hands the device's descriptor to the netstack, which owns
// it from then on, and closes f.
func dupNonblock(f *os.File) (int, error) {
	defer f.Close()
	sc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	err = sc.Control(func(raw uintptr) { fd, derr = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 0) })
	if err == nil {
		err = derr
	}
	return fd, err
}

func (t *Transparent) String() string { return fmt.Sprintf("transparent egress via %s", TunName) }

// TransparentReport is the report's Transparent of a bwrap run.
func (n *Network) TransparentReport() *report.Transparent {
	if n.Mode == "none" {
		return nil
	}
	e := n.Egress
	if why := n.brokerLost.Load(); why != nil && e.Brokered {
		e.Brokered, e.BrokerReason = false, "connect brokering lost: "+*why+": every connection is relayed by the netstack"
	}
	if !e.Enabled {
		e.Brokered, e.BrokerReason = false, ""
	}
	return &e
}
