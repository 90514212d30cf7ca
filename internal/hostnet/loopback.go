//go:build unix

package hostnet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"syscall"

	"github.com/sandbox-run/sandbox-run/forwarder"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/refusals"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/proxy"
	"github.com/sandbox-run/sandbox-run/report"
)

// Loopback is the way out of a mechanism that gives the command no network
// namespace of its own (Landlock, Seatbelt): listeners on host loopback
// ports, outside the sandbox, that the mechanism lets the command connect
// to and nothing else. What serves them is what serves bwrap's sockets:
// the built-in proxy, or a relay to the node's proxy (naming the run), and
// a relay to the node's LLM proxy.
//
// It guarantees that the ports are this run's own listeners while it
// lasts. It does not keep other processes of the host from connecting to
// them: Notes says so where the proxy is the run's own.
type Loopback struct {
	// Mode is the report's network, as bwrap's: "none", "llm only",
	// "proxy (built-in)" or "proxy (socket PATH)". The ports are in Notes,
	// not here: the mode goes into the environment's digest, which two
	// runs under one policy share.
	Mode string
	// ProxyPort and LLMPort are the ports held; 0 for none.
	ProxyPort, LLMPort uint16
	// Env points the command at them (or offline, without a proxy).
	Env map[string]string
	// Notes are the report's notes on them.
	Notes []string
	// Proxy is the built-in proxy, nil for none; its counts are final
	// once Close has returned.
	Proxy *proxy.Proxy

	stop context.CancelFunc
	lns  []net.Listener
	wg   sync.WaitGroup
}

// LoopbackConfig is what StartLoopback needs besides the policy.
type LoopbackConfig struct {
	RunID    string
	Audit    io.Writer           // nil: no audit
	Refusals *refusals.Collector // nil: refusals are not collected
	Logger   *slog.Logger        // nil: discarded
	// CheckSocket fails closed for a node socket the run depends on that
	// is missing, not a socket, refusing, or not the sandbox's to use.
	CheckSocket func(flag, path, fix string) error
	// DualStack holds each port on ::1 as well as 127.0.0.1, for a
	// mechanism that lets the command reach localhost:PORT by port (a
	// Seatbelt profile): no other process may then serve that ::1 port.
	DualStack bool
	// Mechanism names the mechanism in refusals ("landlock").
	Mechanism string
}

// StartLoopback starts what serves the run's loopback ports under p: the
// built-in proxy (p.AllowHosts) or a relay to p.EgressSocket, and a relay
// to p.LLMSocket. With neither, the command is pointed offline and no
// port is held. On error nothing is left running.
func StartLoopback(ctx context.Context, p policy.Policy, cfg LoopbackConfig) (_ *Loopback, err error) {
	if err := secretsUnheld(p, cfg.Mechanism); err != nil {
		return nil, err
	}
	if len(p.AllowHTTP) > 0 {
		return nil, fault.New("--allow-http with --sandbox "+cfg.Mechanism,
			"the run's CA cannot be put over the system certificate bundle without a mount namespace, so TLS is not terminated",
			"leave out --allow-http, or use --sandbox bwrap")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &Loopback{Mode: "none", Env: map[string]string{}, stop: cancel}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if err := l.startEgress(sctx, p, cfg, log); err != nil {
		return nil, err
	}
	if p.LLMSocket != "" {
		if err := cfg.CheckSocket("--llm-socket", p.LLMSocket, "start the node's LLM proxy or fix the path"); err != nil {
			return nil, err
		}
		port, err := l.listen(cfg.DualStack)
		if err != nil {
			return nil, err
		}
		l.LLMPort = port
		l.Notes = append(l.Notes, "the relay to the node's LLM proxy listens on loopback port "+itoa(port))
		l.serveAll(port, func(ln net.Listener) error { return serveLLM(sctx, ln, p.LLMSocket, cfg, log) }, log, "llm relay")
		setLLMEnv(l.Env, "http://127.0.0.1:"+itoa(port), p.LLMEnv)
		if l.Mode == "none" {
			l.Mode = "llm only"
		}
	}
	return l, nil
}

// startEgress starts the built-in proxy or the relay to the node's proxy,
// or points the command offline.
func (l *Loopback) startEgress(ctx context.Context, p policy.Policy, cfg LoopbackConfig, log *slog.Logger) error {
	var serve func(net.Listener) error
	switch {
	case p.EgressSocket != "":
		if err := cfg.CheckSocket("--egress-socket", p.EgressSocket,
			"start the node's proxy (sandbox-run proxy --listen "+p.EgressSocket+") or fix the path"); err != nil {
			return err
		}
		tag := []byte(proxy.RunIDPreamble + cfg.RunID + "\r\n")
		serve = func(ln net.Listener) error { return forwarder.ServeTagged(ctx, ln, p.EgressSocket, tag) }
		l.Mode = "proxy (socket " + p.EgressSocket + ")"
	case len(p.AllowHosts) > 0:
		px, err := proxy.New(proxy.Config{Allow: p.AllowHosts, Audit: cfg.Audit, Logger: log, RunID: cfg.RunID, Refusals: cfg.Refusals})
		if err != nil {
			return &fault.Error{What: "--allow-host", Why: err.Error(), Fix: "write entries as host, host:port, host:*, *.domain, an IP or a CIDR"}
		}
		l.Proxy = px
		serve = func(ln net.Listener) error { return px.Serve(ctx, ln) }
		l.Mode = "proxy (built-in)"
	default:
		setOfflineEnv(l.Env)
		return nil
	}
	port, err := l.listen(cfg.DualStack)
	if err != nil {
		return err
	}
	l.ProxyPort = port
	l.serveAll(port, serve, log, "egress")
	setProxyEnv(l.Env, "http://127.0.0.1:"+itoa(port))
	if l.Proxy != nil {
		l.Notes = append(l.Notes, "the built-in proxy listens on loopback port "+itoa(port)+
			", which other processes of this host can reach too (no network namespace of the run's own)")
	} else {
		l.Notes = append(l.Notes, "the relay to the node's proxy listens on loopback port "+itoa(port))
	}
	return nil
}

// listen holds a free port on 127.0.0.1 and, dualStack, the same port on
// ::1; a host without IPv6 loopback has nothing there to reach, and a note
// says so.
func (l *Loopback) listen(dualStack bool) (uint16, error) {
	var lastErr error
	for range 16 {
		ln4, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return 0, fault.New("cannot listen on a loopback port", fault.Reason(err), "check that 127.0.0.1 is configured")
		}
		port := uint16(ln4.Addr().(*net.TCPAddr).Port)
		if !dualStack {
			l.lns = append(l.lns, ln4)
			return port, nil
		}
		ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", itoa(port)))
		if err == nil {
			l.lns = append(l.lns, ln4, ln6)
			return port, nil
		}
		if lastErr = err; errors.Is(err, syscall.EADDRINUSE) {
			ln4.Close()
			continue
		}
		l.lns = append(l.lns, ln4)
		l.Notes = append(l.Notes, "IPv6 loopback unavailable ("+fault.Reason(err)+"): port "+itoa(port)+" is held on 127.0.0.1 only")
		return port, nil
	}
	return 0, fault.New("cannot hold a loopback port on both 127.0.0.1 and ::1", fault.Reason(lastErr), "free some loopback ports")
}

// serveAll serves every listener held on port.
func (l *Loopback) serveAll(port uint16, serve func(net.Listener) error, log *slog.Logger, what string) {
	for _, ln := range l.lns {
		if uint16(ln.Addr().(*net.TCPAddr).Port) != port {
			continue
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			if err := serve(ln); err != nil {
				log.Warn(what+" stopped", "err", err)
			}
		}()
	}
}

// Close stops what serves the ports and waits for it, so that every
// connection has ended and counted its bytes. It may be called more than
// once.
func (l *Loopback) Close() {
	if l == nil {
		return
	}
	l.stop()
	for _, ln := range l.lns {
		ln.Close()
	}
	l.wg.Wait()
}

// Counts is the built-in proxy's counts for the report, nil without one.
// Call it after Close.
func (l *Loopback) Counts() *report.EgressCounts {
	if l == nil || l.Proxy == nil {
		return nil
	}
	n := l.Proxy.Counts()
	return &report.EgressCounts{Allowed: n.Allowed, Refused: n.Refused, BytesOut: n.BytesOut, BytesIn: n.BytesIn}
}

func itoa(port uint16) string { return strconv.Itoa(int(port)) }
