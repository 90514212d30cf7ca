package gvisor

import (
	"context"
	"log/slog"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/hostnet"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/netstack"
	"github.com/sandbox-run/sandbox-run/report"
)

// Transparent egress under gVisor. The sandbox's network is gVisor's
// own netstack (runsc --network=none: loopback only), which nothing
// outside can attach a device to; so init makes the TUN device inside,
// in gVisor's kernel, with the one capability the spec grants it
// (CAP_NET_ADMIN, dropped on every thread before the command starts),
// and relays its packets over a packet socket bound in to the host,
// where the same netstack as bwrap's serves them, one packet per
// message as from a TUN descriptor. Every connection is judged on the
// host by the built-in proxy's policy; the relay inside decides nothing.
const (
	gvTunInside = "/run/sandbox-run/tun.sock"
	// gvTunMTU is gVisor's TUN device's MTU, which its kernel offers no
	// way to change (no SIOCSIFMTU, no RTM_NEWLINK).
	gvTunMTU = 1500
)

// gvTunAddr is the sandbox's address on gVisor's device: the same as
// bwrap's, with prefix 0, since gVisor routes an address's prefix through
// its device and its netlink has no RTM_NEWROUTE (runsc 20221219).
var gvTunAddr = netip.PrefixFrom(hostnet.TunAddr.Addr(), 0)

// gvTun is the host's end of a gVisor run's transparent egress.
type gvTun struct {
	ln    *net.UnixListener
	ready chan struct{} // closed once the netstack serves, or failed
	err   error         // why it does not; read after ready
}

// planTun decides whether the gVisor run gets transparent egress (with
// the built-in proxy only, whose allow-list the netstack asks) and, if
// so, binds the resolver's files, listens on the relay's socket, starts
// the one accept that serves it, and returns init's part. The report's
// Transparent is set either way (n.egress).
func (g *gvRun) planTun(uid, gid int, root bool, log *slog.Logger) (*initproc.Tun, error) {
	n := g.nw
	if n.Proxy == nil {
		n.Egress = report.Transparent{Reason: "no allow-list with the built-in proxy: nothing may go out, or a node proxy decides"}
		return nil, nil
	}
	if err := n.BindResolver(); err != nil {
		return nil, err
	}
	ln, path, err := n.ListenOn("unixpacket", "tun.sock", uid, gid, root)
	if err != nil {
		return nil, err
	}
	t := &gvTun{ln: ln.(*net.UnixListener), ready: make(chan struct{})}
	g.tun = t
	n.Binds = append(n.Binds, [2]string{path, gvTunInside})
	n.Egress = report.Transparent{Enabled: true}
	n.Serve(func(ctx context.Context) error { return t.serve(ctx, n, log) }, log, "gVisor netstack")
	return &initproc.Tun{Addr: gvTunAddr, Socket: gvTunInside}, nil
}

// serve accepts init's one connection (the listener is closed at once,
// so nothing else inside can connect after it) and serves the netstack
// over it until ctx ends.
func (t *gvTun) serve(ctx context.Context, n *hostnet.Network, log *slog.Logger) error {
	stop := context.AfterFunc(ctx, func() { t.ln.Close() })
	c, err := t.ln.AcceptUnix()
	t.ln.Close()
	stop()
	var st *netstack.Stack
	if err == nil {
		st, err = t.stack(c, n, log)
	}
	t.err = err
	close(t.ready)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return st.Serve(ctx)
}

// stack builds the netstack over c's descriptor (a duplicate the
// netstack owns; c is closed), judged like bwrap's.
func (t *gvTun) stack(c *net.UnixConn, n *hostnet.Network, log *slog.Logger) (*netstack.Stack, error) {
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(raw uintptr) { fd, derr = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return netstack.New(n.NetstackConfig(fd, gvTunMTU, false, log))
}

// confirm is called once init reported the command started, which it
// does only after it connected to the relay: it waits for the accept,
// and names transparent egress lost in the report when the netstack
// could not serve it (the sandbox's connections then fail; nothing else
// goes out).
func (t *gvTun) confirm(r *report.Report) {
	if t == nil {
		return
	}
	<-t.ready
	if t.err != nil && r.Transparent != nil {
		r.Transparent = &report.Transparent{Reason: "the host's netstack could not serve gVisor's TUN device (" + t.err.Error() + "): only the HTTP proxy variables work"}
	}
}
