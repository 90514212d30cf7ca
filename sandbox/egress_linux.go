package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/tun"
	"github.com/sandbox-run/sandbox-run/netstack"
)

// The sandbox's side of transparent egress: its address on the TUN
// device, the resolver's address (answered by the netstack), the device's
// name and MTU. The namespace is the sandbox's own, so fixed values
// cannot collide with the host's.
var (
	tunAddr     = netip.MustParsePrefix("10.0.2.15/24")
	resolverIP  = netip.MustParseAddr("10.0.2.3")
	tunName     = "tun0"
	tunMTU      = 65520 // large packets: fewer trips through the stack per byte
	hostsInside = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tsandbox\n"
)

// transparent is a run's transparent egress, planned before bwrap starts
// and attached once bwrap has made the sandbox's network namespace.
type transparent struct {
	gateR, gateW *os.File // init waits on gateR until the device is up
}

// planTransparent decides whether the run gets transparent egress: with
// the built-in proxy (its allow-list is the policy the netstack asks)
// and as root (see internal/tun). It writes the sandbox's resolv.conf and
// hosts file into the runtime directory and binds them over /etc's, so
// that every lookup goes to the netstack's resolver.
func (n *network) planTransparent(root bool) error {
	switch {
	case n.px == nil:
		n.egress = Transparent{Reason: "no allow-list with the built-in proxy: nothing may go out, or a node proxy decides"}
		return nil
	case !root:
		n.egress = Transparent{Reason: "needs root to make the sandbox's TUN device from outside (unprivileged, only the HTTP proxy variables work)"}
		return nil
	}
	for name, text := range map[string]string{
		"resolv.conf": "nameserver " + resolverIP.String() + "\noptions attempts:1 timeout:2\n",
		"hosts":       hostsInside,
	} {
		path := filepath.Join(n.dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return setupErr("cannot write the sandbox's "+name, err.Error(), "check that $TMPDIR is writable")
		}
		n.binds = append(n.binds, [2]string{path, "/etc/" + name})
	}
	r, w, err := os.Pipe()
	if err != nil {
		return setupErr("cannot create a pipe", err.Error(), "raise the descriptor limit")
	}
	n.tun = &transparent{gateR: r, gateW: w}
	n.egress = Transparent{Enabled: true}
	return nil
}

// attachTransparent makes the TUN device in the namespace of the
// sandbox's PID 1, starts the netstack over it with the built-in proxy's
// judgement, and opens init's gate. A device that cannot be made (root
// without CAP_SYS_PTRACE may not enter the sandbox's namespace, a
// container may have no /dev/net/tun) loses transparent egress, not the
// run: the command starts with the proxy alone, as an unprivileged run
// does, and the report says why (n.egress). On any later error the gate
// stays shut (init then ends without starting the command) and the
// caller ends the run.
func (n *network) attachTransparent(pid int, log *slog.Logger) error {
	t := n.tun
	defer t.gateW.Close()
	f, err := tun.Open(pid, tun.Config{Name: tunName, Addr: tunAddr, MTU: tunMTU, Route: true, VnetHdr: true})
	if err != nil {
		n.egress = Transparent{Reason: "the sandbox's TUN device could not be made (" + err.Error() + "): only the HTTP proxy variables work"}
		log.Warn("transparent egress lost", "err", err)
		if _, err := t.gateW.WriteString("go\n"); err != nil {
			return setupErr("cannot start the command", "init's gate: "+err.Error(), "report this as a bug in sandbox-run")
		}
		return nil
	}
	fd, err := dupNonblock(f)
	if err != nil {
		return setupErr("cannot use the sandbox's TUN device", err.Error(), "raise the descriptor limit")
	}
	dial := n.px.Transparent(n.ctx)
	st, err := netstack.New(netstack.Config{FD: fd, MTU: uint32(tunMTU), VnetHdr: true, DNS: resolverIP,
		Dial: func(ctx context.Context, name string, dst netip.AddrPort) (net.Conn, error) {
			return dial.Dial(ctx, name, dst)
		},
		Lookup: n.px.Lookup, Logger: log,
		Limits: netstackLimits(), Refused: n.netstackRefused,
	})
	if err != nil {
		return setupErr("cannot start the sandbox's netstack", err.Error(), "report this as a bug in sandbox-run")
	}
	n.serve(st.Serve, log, "netstack")
	if _, err := t.gateW.WriteString("go\n"); err != nil {
		return setupErr("cannot start the command", "init's gate: "+err.Error(), "report this as a bug in sandbox-run")
	}
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

func (t *transparent) String() string { return fmt.Sprintf("transparent egress via %s", tunName) }

// close releases both ends of init's gate (start closes the child's end
// once bwrap holds it; attachTransparent the other once it has spoken).
func (t *transparent) close() {
	t.gateR.Close()
	t.gateW.Close()
}

// transparentReport is the report's Transparent of a bwrap run.
func (n *network) transparentReport() *Transparent {
	if n.mode == "none" {
		return nil
	}
	e := n.egress
	return &e
}
