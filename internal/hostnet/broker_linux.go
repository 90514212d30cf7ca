package hostnet

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/connbroker"
)

// BrokerEnv, set to 0 in sandbox-run's environment, keeps every
// connection of transparent egress on the netstack's path (no connect
// broker): for comparison, and for a test of the netstack's own limits.
const BrokerEnv = "SANDBOX_RUN_CONNECT_BROKER"

// PlanBroker decides, for a run with transparent egress whose command
// starts through init's exec shim (bwrap), whether its TCP connections
// to allowed addresses get the kernel's data path (internal/connbroker).
// It returns the socket pair that carries the filter's listener (the
// child's end for init, the launcher's for ServeBroker), or nils with
// the report saying why not. The same judge decides either way.
func (n *Network) PlanBroker(log *slog.Logger) (child, parent *os.File) {
	if n == nil || n.Tun == nil {
		return nil, nil
	}
	why := ""
	if os.Getenv(BrokerEnv) == "0" {
		why = BrokerEnv + "=0"
	} else if err := connbroker.Supported(); err != nil {
		why = err.Error()
	}
	if why == "" {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			n.Egress.Brokered, n.ports = true, connbroker.LocalPorts()
			return os.NewFile(uintptr(fds[0]), "broker-child"), os.NewFile(uintptr(fds[1]), "broker")
		}
		why = "no socket for its listener: " + err.Error()
	}
	n.Egress.BrokerReason = why + ": every connection is relayed by the netstack"
	log.Debug("connect broker off", "why", why)
	return nil, nil
}

// ServeBroker receives the command's filter listener on sock (which it
// owns) and serves it for the run's life. A listener that never comes
// (the shim declined, or died) leaves every connection on the netstack's
// path, and the report says why.
func (n *Network) ServeBroker(sock *os.File, log *slog.Logger) {
	n.Serve(func(ctx context.Context) error {
		l, err := connbroker.Receive(ctx, sock)
		if errors.Is(err, context.Canceled) {
			// The run ended first: its command made no connect that
			// waited on the listener (a connect waits until it is served).
			return nil
		}
		if err != nil {
			why := err.Error()
			var de *connbroker.DeclinedError
			if errors.As(err, &de) {
				why = de.Why
			}
			n.brokerLost.Store(&why)
			log.Warn("connect broker lost", "why", why)
			return nil
		}
		return l.Serve(ctx, connbroker.Config{Dial: n.brokerDial, Inside: n.brokerInside, Logger: log})
	}, log, "connect broker")
}

// brokerDial judges and connects a connection the command makes to dst,
// under the name the netstack's resolver gave dst out for.
func (n *Network) brokerDial(ctx context.Context, dst netip.AddrPort) (*os.File, error) {
	st := n.stack.Load()
	if st == nil || n.dialer == nil {
		return nil, errors.New("no netstack")
	}
	return n.dialer.HandOff(ctx, st.NameOf(dst.Addr()), dst, n.ports.Bind)
}

// brokerInside says which addresses stay on the sandbox's own path: its
// TUN network (the resolver), and everything but IPv4 (the only family
// the TUN device routes); everything while no netstack serves (egress
// lost: connects fail inside as they would).
func (n *Network) brokerInside(a netip.Addr) bool {
	return n.stack.Load() == nil || !a.Is4() || TunAddr.Contains(a)
}
