package hostnet

import (
	"errors"
	"net/netip"
	"os"
	"strconv"

	"github.com/sandbox-run/sandbox-run/internal/audit"
	"github.com/sandbox-run/sandbox-run/internal/netstack"
	"github.com/sandbox-run/sandbox-run/internal/refusals"
)

// The netstack's bounds for a run (netstack.Limits), and how a
// connection it resets by them is named. Apart from egress_linux.go so
// that the wiring there stays small.

// maxConnsEnv lowers the netstack's connection limit for a run (never
// raises it): for an operator who wants a tighter memory bound, and for
// the test that shows the bound holds.
const maxConnsEnv = "SANDBOX_RUN_NETSTACK_MAX_CONNS"

// netstackLimits are the netstack's defaults, with the connection limit
// lowered by maxConnsEnv when it holds a number below the default.
func netstackLimits() netstack.Limits {
	l := netstack.Limits{}
	if v, err := strconv.Atoi(os.Getenv(maxConnsEnv)); err == nil && v > 0 && v < netstack.DefaultMaxConns {
		l.MaxConns = v
	}
	return l
}

// netstackRefused names a connection the netstack reset by its own
// limit: in the audit (an egress line, as the proxy writes for the
// policy's refusals) and once in the run's refusals. No flag allows it.
func (n *Network) netstackRefused(name string, dst netip.AddrPort, err error) {
	host := name
	if host == "" {
		host = dst.Addr().String()
	}
	const reason = "connection-limit"
	audit.Event(n.audit, n.runID, "egress", map[string]any{"method": "TCP", "host": host, "port": int(dst.Port()),
		"ip": dst.Addr().String(), "decision": "refuse", "reason": reason, "why": err.Error()})
	why := err.Error()
	if le := (*netstack.ConnLimitError)(nil); errors.As(err, &le) {
		why = le.Why()
	}
	n.refused.Add(refusals.Refusal{Kind: refusals.KindConnect, Host: host, Port: int(dst.Port()), Reason: reason, Why: why})
}
