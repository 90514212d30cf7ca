package hostnet

import (
	"context"
	"io"
	"log/slog"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/refusals"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// Kind is how a sandbox reaches the run's network.
type Kind int

const (
	// NoNetwork: the mechanism has no network side of its own (tier 0,
	// whose command has the host's).
	NoNetwork Kind = iota
	// ViaSockets: the sandbox has a network namespace of its own, into which
	// the proxies' Unix sockets are bound (bwrap, gVisor): SetupNetwork.
	ViaSockets
	// ViaLoopback: the sandbox shares the host's network, and the proxies
	// listen on host loopback ports that the mechanism confines its
	// connects to (Landlock, Seatbelt): StartLoopback.
	ViaLoopback
)

// Reach is how a mechanism's sandbox reaches the run's network, as the
// mechanism finds it can on this host (its Probe). The zero value is
// no network of its own.
type Reach struct {
	Kind Kind
	// Mechanism names the mechanism in refusals ("landlock").
	Mechanism string
	// DualStack (ViaLoopback) holds each port on ::1 as well (see
	// LoopbackConfig).
	DualStack bool
	// CheckSocket (ViaLoopback), when set, vets a node socket the run
	// depends on in place of CheckSocket for UID and GID (macOS has its
	// own).
	CheckSocket func(flag, path, fix string) error
}

// Request is the run's network as the skeleton plans it: the
// mechanism's Reach, for the planned policy, ids and guard. The zero
// value asks for none.
type Request struct {
	Reach
	// Policy is the run's policy as planned (a session's home and the
	// caches among its writable dirs, which the network's own files must
	// lie outside; on macOS its paths resolved).
	Policy policy.Policy
	// UID and GID are the host ids the sandbox runs as; Root says
	// sandbox-run is root, and hands the sockets it makes to them.
	UID, GID int
	Root     bool
	// Guard (ViaSockets) vets the host paths the network hands in (the
	// ssh-agent, named sockets, known_hosts): the plan's, which refuses
	// any in or through a writable directory. Nil: the policy hands in
	// nothing.
	Guard *pathguard.Guard
}

// Run is what the run hands every network, whatever the mechanism.
type Run struct {
	RunID     string
	Audit     io.Writer           // nil: no audit
	Refusals  *refusals.Collector // nil: not collected
	Logger    *slog.Logger        // nil: discarded
	LookupEnv func(string) (string, bool)
}

// Net is a run's network as the skeleton started it: Sockets for a
// Request ViaSockets, Loopback for one ViaLoopback, neither for NoNetwork.
// The mechanism uses it and never closes it; the skeleton closes it once
// the sandbox is gone, then reads its counts. The zero value is no
// network; its methods are no-ops.
type Net struct {
	Sockets  *Network
	Loopback *Loopback
}

// Start starts the run's network for req. On error nothing is left
// running.
func Start(ctx context.Context, req Request, run Run) (Net, error) {
	p := req.Policy
	switch req.Kind {
	case NoNetwork:
		return Net{}, nil
	case ViaSockets:
		n, err := startSockets(ctx, p, req, run)
		return Net{Sockets: n}, err
	case ViaLoopback:
		l, err := startLoopback(ctx, p, req, run)
		return Net{Loopback: l}, err
	}
	return Net{}, fault.New("network", "unknown kind", "report this as a bug in sandbox-run")
}

// Close stops what serves the network and waits for it, so that every
// connection has ended and counted its bytes. It may be called more than
// once.
func (n Net) Close() {
	if n.Sockets != nil {
		n.Sockets.Close()
	}
	if n.Loopback != nil {
		n.Loopback.Close()
	}
}

// HandIn is what the network hands in for the report, nil for nothing.
func (n Net) HandIn() *report.HandInReport {
	if n.Sockets != nil {
		return n.Sockets.HandIn
	}
	return nil
}

// Counts is the built-in proxy's counts for the report, nil without one.
// Call it after Close.
func (n Net) Counts() *report.EgressCounts {
	if n.Sockets != nil {
		return n.Sockets.Counts()
	}
	if n.Loopback != nil {
		return n.Loopback.Counts()
	}
	return nil
}

// logger is run's logger, or one that discards.
func (r Run) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}
