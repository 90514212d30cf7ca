package proxy

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/allowlist"
	"github.com/sandbox-run/sandbox-run/internal/refusals"
)

// RefusalHeader is the response header that carries the reason code of a
// refusal (see the package documentation for the codes).
const RefusalHeader = "X-Sandbox-Refusal"

const (
	resolveTimeout = 10 * time.Second
	dialTimeout    = 10 * time.Second
)

// The pool of idle upstream connections of forwarded (plain HTTP)
// requests. A node-wide proxy serves many sandboxes talking to the same
// hosts at once: a connection that finds no room in the pool when its
// request ends is closed, and the next request dials a new one (a
// handshake, a judgement's re-check, a TIME_WAIT socket). With 64 per host,
// 500 concurrent clients of one host made the proxy dial for two requests
// in five, a sixth of its CPU time (docs/BENCHMARKS.md, section 5); 512
// keeps one connection per client up to 512 clients of a host. An idle
// connection costs a descriptor, two goroutines and about 10 KiB, and is
// closed after 90 s unused (IdleConnTimeout).
const (
	maxIdleUpstreamPerHost = 512
	maxIdleUpstream        = 1024
)

// forwardFlushInterval bounds how long bytes of a forwarded answer of
// known length may wait in the proxy's buffers (see Serve).
const forwardFlushInterval = 10 * time.Millisecond

// bufferPool is an httputil.BufferPool of 32 KiB buffers, which forwarded
// answers are copied through; without a pool ReverseProxy allocates one
// per answer.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) {
	if cap(buf) == 32<<10 {
		buf = buf[:cap(buf)]
		b.p.Put(&buf)
	}
}

// Defaults for the client-connection timeouts of Config.
const (
	// DefaultReadHeaderTimeout is Config.ReadHeaderTimeout when it is zero.
	// A client on the proxy's socket sends its request header in one write
	// as soon as it connects; ten seconds is far more than that takes, and
	// short enough that connections which never send one are reclaimed.
	DefaultReadHeaderTimeout = 10 * time.Second

	// DefaultIdleTimeout is Config.IdleTimeout when it is zero. It is
	// longer than the 90 s after which common HTTP clients (Go's
	// http.Transport, curl) drop an idle connection themselves, so that
	// the client, not the proxy, normally closes it, and a request sent
	// just as the proxy closes is rare.
	DefaultIdleTimeout = 2 * time.Minute
)

// errDialRefused is returned by the dialer when its Control hook refuses an
// address. It only surfaces when a decision and a dial disagree, which the
// proxy's own code never causes.
var errDialRefused = errors.New("proxy: dial refused by address re-check")

// Config configures a Proxy. The zero value is a proxy that refuses
// everything.
type Config struct {
	// Allow is the allow list, in the syntax allowlist.Parse documents. Empty
	// means every request is refused.
	Allow []string

	// Audit receives one JSON object per line for every decision, written
	// before any connection is opened:
	// {"time","event":"egress","method","host","port","ip","ips","decision":"allow"|"refuse","reason","entry"}.
	// "ip" is the refused address (empty when the host was refused before
	// resolution) or, when allowed, the first checked address; "ips" lists
	// every checked answer; "reason" is a refusal code or "allow-list", and
	// "entry" the allow-list entry that admitted the host. Each line is one
	// Write call; calls are serialized. Nil means no audit log.
	Audit io.Writer

	// Logger receives operational messages. Nil means discard.
	Logger *slog.Logger

	// RunID, when set, is added to every audit line as "run_id", so that
	// a node-wide log can be split by run.
	RunID string

	// RunIDFromPreamble takes each connection's run id from a preamble
	// line (RunIDPreamble) its client sends first, for a node-wide proxy
	// whose clients are sandboxes' relays: their audit lines then carry
	// the run id of the sandbox they came from, whatever RunID says. Set
	// it only where every client is a relay sandbox-run runs outside the
	// sandbox, never where a sandboxed command connects itself (it could
	// name any run).
	RunIDFromPreamble bool

	// Resolver resolves host names, once per request. Nil means
	// net.DefaultResolver (the proxy host's resolver).
	Resolver interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	}

	// ReadHeaderTimeout bounds how long a client connection may take to
	// send a request header. A new connection that has not sent a whole
	// header within ReadHeaderTimeout of being accepted is closed without
	// a reply, whether it sent nothing, part of a header, or a header one
	// byte at a time: the limit is a deadline, not an inactivity timer.
	// On a kept-alive connection the limit starts when the first bytes of
	// the next request arrive (IdleTimeout bounds the wait for them).
	// Each connection is served on its own, so such connections do not
	// delay other clients' requests; they cost a goroutine and a file
	// descriptor each until then. Once a header has been read, the
	// request body, the response and a CONNECT tunnel have no time limit
	// (see the package documentation). Zero means
	// DefaultReadHeaderTimeout; negative is an error.
	ReadHeaderTimeout time.Duration

	// IdleTimeout bounds how long a kept-alive client connection may wait,
	// after a response, for the first bytes of its next request; then it
	// is closed. Zero means DefaultIdleTimeout; negative is an error.
	IdleTimeout time.Duration

	// Refusals, when set, is told of every refusal, with the exact flag
	// that would allow it (see package refusals).
	Refusals *refusals.Collector
	// HTTPRules are --allow-http rules (httprule syntax). A host a rule
	// names is terminated (see terminate.go) and implicitly on the allow
	// list for its port; its requests are allowed only when a rule matches.
	HTTPRules []string
	// TerminateHosts are further host[:port] targets (port 443 when none)
	// to terminate without rules: every request is allowed at this level
	// and passed to RequestHook. They are not added to the allow list.
	TerminateHosts []string
	// UpstreamRoots verifies terminated hosts' certificates; nil means the
	// system roots.
	UpstreamRoots *x509.CertPool
	// RequestHook, when set, sees every terminated request that the rules
	// allowed, before it is forwarded (see RequestHook).
	RequestHook RequestHook
	// PlainRequestHook, when set, sees every allowed plain-HTTP
	// (absolute-form) request before it is forwarded, as RequestHook does
	// terminated ones; an error refuses it the same way. ResponseHook sees
	// every response to a terminated request before the client does (see
	// secrethooks.go).
	PlainRequestHook RequestHook
	ResponseHook     func(*http.Response) error
}

type resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Proxy is an egress proxy for HTTP (absolute-form requests) and CONNECT
// tunnels that connects only to addresses its allow list and refused-range
// table admit. Its allow list can be replaced while it serves (SetAllow);
// nothing else changes after New. It may serve several listeners at once.
type Proxy struct {
	allow  atomic.Pointer[allowlist.List]
	counts struct{ allowed, refused, bytesOut, bytesIn atomic.Int64 }
	runID  string
	// runIDPreamble: see Config.RunIDFromPreamble.
	runIDPreamble bool
	audit         *auditLog
	refused       *refusals.Collector
	log           *slog.Logger
	resolver      resolver

	readHeaderTimeout time.Duration
	idleTimeout       time.Duration

	// dialHook, when set (tests only), sees every address the dialer is about
	// to connect to, before the Control re-check.
	dialHook func(netip.AddrPort)

	// ownAddrs lists the proxy host's own addresses (own.get; tests may
	// replace it). own is held while Serve serves.
	ownAddrs func() ([]netip.Addr, error)
	own      *ownWatch

	l7      *l7      // TLS termination and rules; nil when nothing is terminated
	implied []string // allow-list entries the rules' hosts imply

	plainHook RequestHook                // Config.PlainRequestHook
	respHook  func(*http.Response) error // Config.ResponseHook
}

// New validates cfg and returns a Proxy. The error wraps ErrInvalidEntry
// when an allow-list entry is invalid.
func New(cfg Config) (*Proxy, error) {
	l, implied, err := newL7(cfg)
	if err != nil {
		return nil, err
	}
	allow, err := allowlist.Parse(append(slices.Clip(cfg.Allow), implied...))
	if err != nil {
		return nil, err
	}
	if cfg.ReadHeaderTimeout < 0 || cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("proxy: ReadHeaderTimeout %v, IdleTimeout %v: a timeout must not be negative (zero means the default)",
			cfg.ReadHeaderTimeout, cfg.IdleTimeout)
	}
	p := &Proxy{
		log: cfg.Logger, resolver: cfg.Resolver, runID: cfg.RunID, runIDPreamble: cfg.RunIDFromPreamble, refused: cfg.Refusals,
		readHeaderTimeout: cmp.Or(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		idleTimeout:       cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout),
		own:               &ownWatch{list: interfaceAddrs},
		l7:                l, implied: implied,
		plainHook: cfg.PlainRequestHook, respHook: cfg.ResponseHook,
	}
	p.ownAddrs = p.own.get
	p.allow.Store(&allow)
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if cfg.Audit != nil {
		p.audit = &auditLog{w: cfg.Audit}
	}
	return p, nil
}

// SetAllow replaces the allow list for every request decided from now on.
// A request already decided keeps its decision; an open tunnel stays open.
// On error the old list stays in force.
func (p *Proxy) SetAllow(entries []string) error {
	allow, err := allowlist.Parse(append(slices.Clip(entries), p.implied...))
	if err != nil {
		return err
	}
	p.allow.Store(&allow)
	return nil
}

// Serve serves proxy requests on ln until ctx is done, then closes ln, every
// client connection that is still an HTTP connection and every connection
// the proxy opened upstream (which ends CONNECT tunnels), and returns nil.
// If ln fails first, Serve closes the same things and returns the error,
// wrapped. Handler goroutines may still be unwinding when Serve returns.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	s := newSession(p, ctx)
	defer p.own.hold()()
	sweepDone := make(chan struct{})
	defer close(sweepDone)
	go s.plain.sweepIdle(sweepDone)

	tr := s.newForward()

	// ReadHeaderTimeout and IdleTimeout bound connections that send no
	// request (slowloris); see Config. There is deliberately no ReadTimeout
	// or WriteTimeout: they would cut long uploads, downloads and tunnels.
	var connContext func(context.Context, net.Conn) context.Context
	if p.runIDPreamble {
		ln = preambleListener{ln}
		connContext = func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		}
	}
	srv := &http.Server{
		ConnContext:       connContext,
		Handler:           s,
		ReadHeaderTimeout: p.readHeaderTimeout,
		IdleTimeout:       p.idleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	// The terminator exists before the first connection is served: a
	// CONNECT that found it nil would be tunnelled past the L7 rules.
	if p.l7 != nil {
		s.term = s.newTerminator()
		defer s.term.stop()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	_ = srv.Close()
	s.closeAll()
	tr.CloseIdleConnections()
	if err == nil {
		<-errc // ErrServerClosed, after ln is closed
		return nil
	}
	return fmt.Errorf("proxy: serve: %w", err)
}

// newForward sets s.forward, the ReverseProxy of the absolute-form
// requests forwardPlain does not take, and returns its transport.
func (s *session) newForward() *http.Transport {
	// The transport is ours, not http.DefaultTransport: no Proxy func (the
	// default reads HTTP(S)_PROXY and would chain around the checks), and a
	// dialer that connects only to the addresses a decision checked. It
	// never follows redirects (http.Transport does not; only http.Client
	// does).
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           s.dialTransport,
		ForceAttemptHTTP2:     false,
		MaxIdleConns:          maxIdleUpstream,
		MaxIdleConnsPerHost:   maxIdleUpstreamPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	s.forward = &httputil.ReverseProxy{
		// The client's absolute URL is the upstream request's URL as it
		// stands; Rewrite (not Director) strips hop-by-hop and
		// X-Forwarded-* headers and adds none.
		Rewrite:   func(*httputil.ProxyRequest) {},
		Transport: tr,
		// An answer of unknown length (chunked: a long poll, a stream) or
		// an event stream is flushed after every read, whatever this says
		// (ReverseProxy.flushInterval); one of known length is held at
		// most this long. Not -1, which flushes the header on its own from
		// a timer goroutine and then every read: two writes and a
		// goroutine per small answer.
		FlushInterval: forwardFlushInterval,
		BufferPool:    s.bufs,
		ErrorLog:      slog.NewLogLogger(s.p.log.Handler(), slog.LevelDebug),
		ErrorHandler:  s.forwardError,
	}
	return tr
}

// decision is the outcome of checking one request, made before any
// connection is opened. An allowed decision lists the only addresses the
// dialer may connect to.
type decision struct {
	method  string
	raw     string // the target as the client wrote it
	t       target
	ips     []netip.Addr // checked, unmapped, zone-free
	entry   string       // the allow-list entry that admitted the host
	refusal *refusal
	runID   string // the connection's run id (Config.RunIDFromPreamble), "" for the proxy's own
	// bind, when set, binds the upstream socket before it connects
	// (Transparent.HandOff).
	bind func(network string, c syscall.RawConn) error
}

type refusal struct {
	reason string
	status int
	ip     netip.Addr // the address that was refused, if any
	rule   string     // which rule refused, for people
	fix    string     // how to allow it, for people
	flag   string     // the exact flag that allows it ("--allow-host h:p"); "" when none can
}

// decide checks a request for t. It resolves a host name once; the request
// is refused if any answer is refused.
func (p *Proxy) decide(ctx context.Context, method, raw string, t target) *decision {
	d := &decision{method: method, raw: raw, t: t}
	if t.IsAddr() {
		if r := p.judge(t, t.Addr()); r != nil {
			d.refusal = r
			return d
		}
		e, ok := p.allow.Load().MatchAddr(t.Addr(), t.Port())
		if !ok {
			d.refusal = notAllowed(t)
			return d
		}
		d.ips, d.entry = []netip.Addr{t.Addr()}, e
		return d
	}
	e, ok := p.allow.Load().MatchHost(t.Name(), t.Port())
	if !ok {
		d.refusal = notAllowed(t)
		return d
	}
	d.entry = e
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	answers, err := p.resolver.LookupNetIP(rctx, "ip", t.Name())
	if err == nil && len(answers) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		d.refusal = &refusal{
			reason: reasonDNS, status: http.StatusBadGateway,
			rule: fmt.Sprintf("%s did not resolve on the proxy host: %v", t.Name(), err),
			fix:  "check the name; it is resolved by the proxy host's resolver",
		}
		return d
	}
	for _, ip := range answers {
		ip = ip.Unmap().WithZone("")
		if !slices.Contains(d.ips, ip) {
			d.ips = append(d.ips, ip)
		}
	}
	for _, ip := range d.ips {
		if r := p.judge(t, ip); r != nil {
			d.refusal = r
			return d
		}
	}
	return d
}

// judge checks one address against the refused ranges and the proxy host's
// own addresses; nil means it may be connected to (for t's port).
func (p *Proxy) judge(t target, ip netip.Addr) *refusal {
	v := allowlist.Classify(ip)
	if v.Never() {
		return p.judgeRange(t, ip, v)
	}
	if r := p.judgeOwn(t, ip); r != nil {
		return r
	}
	if v.Public() {
		return nil
	}
	return p.judgeRange(t, ip, v)
}

// judgeRange checks ip, which classify put in a refused range (v.rule is
// set), against that range's rule.
func (p *Proxy) judgeRange(t target, ip netip.Addr, v allowlist.Verdict) *refusal {
	via := ""
	if !t.IsAddr() {
		via = fmt.Sprintf("%s resolved to %s: ", t.Name(), ip)
	}
	if v.Never() {
		return &refusal{
			reason: v.Reason(), status: http.StatusForbidden, ip: ip,
			rule: fmt.Sprintf("%s%s is in %s (%s); the proxy never connects to that range",
				via, v.Describe(ip), v.Range(), v.What()),
			fix: "not possible: no allow-list entry makes this range reachable",
		}
	}
	if _, ok := p.allow.Load().MatchAddr(ip, t.Port()); ok {
		return nil
	}
	rule := fmt.Sprintf("%s%s is in %s (%s); private addresses are reachable only when an allow-list entry names the address or its range",
		via, v.Describe(ip), v.Range(), v.What())
	fix := fmt.Sprintf("add --allow-host %s (or the range --allow-host %s)", allowlist.Suggest(ip.String(), t.Port()), v.Range())
	if !t.IsAddr() {
		rule += "; a host name entry is not enough"
		fix = fmt.Sprintf("add --allow-host %s next to the entry for %s (or the range --allow-host %s)",
			allowlist.Suggest(ip.String(), t.Port()), t.Name(), v.Range())
	}
	return &refusal{reason: reasonPrivate, status: http.StatusForbidden, ip: ip, rule: rule, fix: fix,
		flag: "--allow-host " + allowlist.Suggest(ip.String(), t.Port())}
}

func notAllowed(t target) *refusal {
	return &refusal{
		reason: reasonNotAllowed, status: http.StatusForbidden,
		rule: fmt.Sprintf("%s is not on the allow list (host entries cover ports 80 and 443 unless they name a port)", t),
		fix:  "add --allow-host " + allowlist.Suggest(t.Host(), t.Port()),
		flag: "--allow-host " + allowlist.Suggest(t.Host(), t.Port()),
	}
}

func badTarget(reason, raw string, err error) *refusal {
	r := &refusal{reason: reason, status: http.StatusForbidden,
		rule: fmt.Sprintf("%q is not a destination the proxy can check: %v", raw, err)}
	switch reason {
	case reasonBadScheme:
		r.fix = "use http:// or https:// URLs, or CONNECT for other protocols"
	default:
		r.fix = "use a host name or a standard IP address (a.b.c.d, [v6]) with a port from 1 to 65535"
	}
	return r
}

// permits is the Control hook's re-check: ap must be one of the decision's
// checked addresses on its port, and still pass the range table.
func (p *Proxy) permits(d *decision, ap netip.AddrPort) bool {
	ip := ap.Addr().Unmap()
	if ip.Zone() != "" || ap.Port() != d.t.Port() || !slices.Contains(d.ips, ip) {
		return false
	}
	if p.judge(d.t, ip) != nil {
		return false
	}
	if d.t.IsAddr() {
		_, ok := p.allow.Load().MatchAddr(ip, d.t.Port())
		return ok
	}
	_, ok := p.allow.Load().MatchHost(d.t.Name(), d.t.Port())
	return ok
}

// session is the state of one Serve call.
type session struct {
	p   *Proxy
	ctx context.Context

	forward *httputil.ReverseProxy // absolute-form requests forwardPlain does not take, over the checked transport
	plain   *plainPool             // forwardPlain's idle upstream connections
	bufs    *bufferPool            // copy buffers of forwarded answers
	// reencodeQuery: GODEBUG's urlmaxqueryparams is set (see plainForwardable).
	reencodeQuery bool
	term          *terminator // terminated connections; nil when nothing is terminated

	mu     sync.Mutex
	conns  map[*upstreamConn]struct{}
	closed bool
}

// newSession is the state of a Serve (or Transparent) call on ctx.
func newSession(p *Proxy, ctx context.Context) *session {
	return &session{p: p, ctx: ctx, conns: make(map[*upstreamConn]struct{}),
		plain: &plainPool{idle: make(map[target][]*plainConn)}, bufs: &bufferPool{}, reencodeQuery: reencodesQuery()}
}

type decisionKey struct{}

// check parses and decides a request, and records the decision.
func (s *session) check(ctx context.Context, method, raw string, defaultPort uint16, scheme string) *decision {
	var d *decision
	switch t, err := parseTarget(raw, defaultPort); {
	case method != http.MethodConnect && scheme != "http" && scheme != "https":
		d = &decision{method: method, raw: raw,
			refusal: badTarget(reasonBadScheme, scheme+"://"+raw, errors.New("unsupported scheme"))}
	case err != nil:
		d = &decision{method: method, raw: raw, refusal: badTarget(reasonBadHost, raw, err)}
	default:
		d = s.p.decide(ctx, method, raw, t)
	}
	d.runID = connRunID(ctx)
	s.p.record(d)
	return d
}

// dialTransport is the http.Transport's dialer: it dials only for requests
// that carry an allowed decision.
func (s *session) dialTransport(ctx context.Context, _, addr string) (net.Conn, error) {
	d, ok := ctx.Value(decisionKey{}).(*decision)
	if !ok || d.refusal != nil {
		return nil, fmt.Errorf("BUG(sandbox-run): proxy: dial %s without an allowed decision: %w", addr, errDialRefused)
	}
	c, err := s.dial(ctx, d, addr)
	if err != nil {
		return nil, err // not a nil *upstreamConn in a non-nil net.Conn
	}
	return c, nil
}

// dial connects to the first reachable checked address of d. addr is what
// a CONNECT or the transport asks for; it must denote d's target.
func (s *session) dial(ctx context.Context, d *decision, addr string) (*upstreamConn, error) {
	if d.refusal != nil || len(d.ips) == 0 {
		return nil, fmt.Errorf("BUG(sandbox-run): proxy: dial %s for a refused decision: %w", addr, errDialRefused)
	}
	if t, err := parseTarget(addr, 0); err != nil || t != d.t {
		return nil, fmt.Errorf("BUG(sandbox-run): proxy: dial %s does not match the checked target %s: %w", addr, d.t, errDialRefused)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel) // shutdown aborts dials in progress
	defer stop()

	dialer := net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: 30 * time.Second,
		Control: func(network, address string, c syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("proxy: re-check %s: %w", address, errDialRefused)
			}
			if s.p.dialHook != nil {
				s.p.dialHook(ap)
			}
			if !s.p.permits(d, ap) {
				return fmt.Errorf("proxy: re-check %s: %w", address, errDialRefused)
			}
			if d.bind != nil {
				return d.bind(network, c)
			}
			return nil
		},
	}
	var errs []error
	for _, ip := range d.ips {
		c, err := dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(ip, d.t.Port()).String())
		if err != nil {
			errs = append(errs, err)
			if errors.Is(err, errDialRefused) || ctx.Err() != nil {
				break
			}
			continue
		}
		uc, err := s.track(c.(*net.TCPConn))
		if err != nil {
			return nil, err
		}
		uc.d, uc.start = d, time.Now()
		return uc, nil
	}
	return nil, fmt.Errorf("proxy: dial %s: %w", d.t, errors.Join(errs...))
}

// upstreamConn is a connection the proxy opened. Embedding *net.TCPConn
// keeps CloseWrite (tunnels half-close) and the splice fast paths.
type upstreamConn struct {
	*net.TCPConn
	s *session

	d       *decision
	start   time.Time
	in, out atomic.Int64 // bytes from and to the upstream
	once    sync.Once

	// handedOff is set once the socket went to the sandbox
	// (Transparent.HandOff): its bytes never pass the proxy.
	handedOff bool

	// client is the client's end of a CONNECT tunnel over this
	// connection, nil for a forwarded request's; closeAll closes it too,
	// so that a tunnel whose upstream already half-closed ends with
	// Serve. Guarded by s.mu.
	client net.Conn
}

// Read, Write, ReadFrom and WriteTo count the bytes each way; the last two
// keep the splice paths io.Copy takes.
func (c *upstreamConn) Read(b []byte) (int, error) {
	n, err := c.TCPConn.Read(b)
	c.in.Add(int64(n))
	return n, err
}

func (c *upstreamConn) Write(b []byte) (int, error) {
	n, err := c.TCPConn.Write(b)
	c.out.Add(int64(n))
	return n, err
}

func (c *upstreamConn) ReadFrom(r io.Reader) (int64, error) {
	n, err := c.TCPConn.ReadFrom(r)
	c.out.Add(n)
	return n, err
}

func (c *upstreamConn) WriteTo(w io.Writer) (int64, error) {
	n, err := c.TCPConn.WriteTo(w)
	c.in.Add(n)
	return n, err
}

func (c *upstreamConn) Close() error {
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	c.once.Do(func() { c.s.p.recordEnd(c) })
	return c.TCPConn.Close()
}

func (s *session) track(c *net.TCPConn) (*upstreamConn, error) {
	uc := &upstreamConn{TCPConn: c, s: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return nil, fmt.Errorf("proxy: shutting down: %w", net.ErrClosed)
	}
	s.conns[uc] = struct{}{}
	return uc, nil
}

func (s *session) closeAll() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[*upstreamConn]struct{}{}
	var clients []net.Conn
	for c := range conns {
		if c.client != nil {
			clients = append(clients, c.client)
		}
	}
	s.mu.Unlock()
	s.plain.sweep(true)
	for c := range conns {
		c.once.Do(func() { c.s.p.recordEnd(c) })
		_ = c.TCPConn.Close()
	}
	for _, c := range clients {
		_ = c.Close()
	}
}

// attach records client as the client's end of the tunnel over c. When
// Serve is already shutting down it closes client and reports false.
func (s *session) attach(c *upstreamConn, client net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = client.Close()
		return false
	}
	c.client = client
	return true
}

func refusalResponse(req *http.Request, d *decision) *http.Response {
	r := d.refusal
	var b strings.Builder
	fmt.Fprintf(&b, "sandbox-run egress proxy refused %s %s\n", d.method, d.raw)
	fmt.Fprintf(&b, "reason: %s\n", r.reason)
	fmt.Fprintf(&b, "rule: %s\n", r.rule)
	fmt.Fprintf(&b, "to allow it: %s\n", r.fix)
	resp := textResponse(req, r.status, b.String())
	resp.Header.Set(RefusalHeader, r.reason)
	return resp
}

func textResponse(req *http.Request, status int, body string) *http.Response {
	h := make(http.Header)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Connection", "close")
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Close:         true,
		Request:       req,
	}
}

// auditLog serializes audit lines so each is written whole.
type auditLog struct {
	mu sync.Mutex
	w  io.Writer
}

type auditLine struct {
	Time     string   `json:"time"`
	RunID    string   `json:"run_id,omitempty"`
	Event    string   `json:"event"`
	Method   string   `json:"method"`
	Host     string   `json:"host"`
	Port     int      `json:"port"`
	IP       string   `json:"ip"`
	IPs      []string `json:"ips,omitempty"`
	Decision string   `json:"decision"`
	Reason   string   `json:"reason"`
	Entry    string   `json:"entry,omitempty"`
	Fix      string   `json:"fix,omitempty"` // on a refusal: the exact flag that would allow it
	// On "egress_end" lines, for a connection the proxy opened:
	BytesOut   *int64 `json:"bytes_out,omitempty"` // to the upstream
	BytesIn    *int64 `json:"bytes_in,omitempty"`  // from the upstream
	DurationMS *int64 `json:"duration_ms,omitempty"`
}

// Counts are what a proxy decided and carried so far.
type Counts struct {
	Allowed  int64 `json:"allowed"`   // requests and tunnels allowed
	Refused  int64 `json:"refused"`   // requests and tunnels refused
	BytesOut int64 `json:"bytes_out"` // to upstreams, over connections that have ended
	BytesIn  int64 `json:"bytes_in"`  // from upstreams, over connections that have ended
}

// Counts returns the decisions and bytes so far. Bytes are added when a
// connection to an upstream ends, so call it after Serve has returned for
// the totals.
func (p *Proxy) Counts() Counts {
	return Counts{Allowed: p.counts.allowed.Load(), Refused: p.counts.refused.Load(),
		BytesOut: p.counts.bytesOut.Load(), BytesIn: p.counts.bytesIn.Load()}
}

// lineRunID is the run id an audit line about d carries: its
// connection's, else the proxy's own.
func (p *Proxy) lineRunID(d *decision) string {
	if d.runID != "" {
		return d.runID
	}
	return p.runID
}

// recordEnd writes an "egress_end" line for a connection the proxy opened:
// the bytes each way and how long it was open.
func (p *Proxy) recordEnd(c *upstreamConn) {
	if c.d == nil {
		return
	}
	in, out, ms := c.in.Load(), c.out.Load(), time.Since(c.start).Milliseconds()
	p.counts.bytesIn.Add(in)
	p.counts.bytesOut.Add(out)
	if p.audit == nil {
		return
	}
	line := auditLine{
		Time: time.Now().UTC().Format(time.RFC3339Nano), RunID: p.lineRunID(c.d), Event: "egress_end",
		Method: c.d.method, Host: c.d.t.Host(), Port: int(c.d.t.Port()), IP: c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap().String(),
		Decision: "allow", Reason: "closed", BytesOut: &out, BytesIn: &in, DurationMS: &ms,
	}
	if c.handedOff {
		// The connection goes on in the sandbox: no bytes, no end here.
		line.Reason, line.BytesOut, line.BytesIn, line.DurationMS = "handed-off", nil, nil, nil
	}
	p.writeAudit(line)
}

// record writes d to the audit log and the logger. An audit write error is
// logged, not returned: the decision stands either way.
func (p *Proxy) record(d *decision) {
	line := auditLine{
		Time:   time.Now().UTC().Format(time.RFC3339Nano),
		RunID:  p.lineRunID(d),
		Event:  "egress",
		Method: d.method,
		Host:   d.t.Host(),
		Port:   int(d.t.Port()),
		Entry:  d.entry,
	}
	if line.Host == "" {
		line.Host = d.raw
	}
	for _, ip := range d.ips {
		line.IPs = append(line.IPs, ip.String())
	}
	if d.refusal != nil {
		p.counts.refused.Add(1)
		line.Decision, line.Reason, line.Fix = "refuse", d.refusal.reason, d.refusal.flag
		if d.refusal.ip.IsValid() {
			line.IP = d.refusal.ip.String()
		}
		if d.refusal.reason != reasonDNS { // a name that does not resolve is no policy's refusal
			p.refused.Add(d.refusal.collected(line.Host, line.Port))
		}
		p.log.Info("egress refused", "method", d.method, "host", line.Host, "port", line.Port,
			"ip", line.IP, "reason", line.Reason)
	} else {
		p.counts.allowed.Add(1)
		line.Decision, line.Reason = "allow", "allow-list"
		if len(d.ips) > 0 {
			line.IP = d.ips[0].String()
		}
		p.log.Debug("egress allowed", "method", d.method, "host", line.Host, "port", line.Port,
			"ip", line.IP, "entry", d.entry)
	}
	p.writeAudit(line)
}

func (p *Proxy) writeAudit(line any) {
	if p.audit == nil {
		return
	}
	b, err := json.Marshal(line)
	if err != nil {
		p.log.Warn("audit: encode", "err", err)
		return
	}
	b = append(b, '\n')
	p.audit.mu.Lock()
	_, err = p.audit.w.Write(b)
	p.audit.mu.Unlock()
	if err != nil {
		p.log.Warn("audit: write", "err", err)
	}
}
