package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/httprule"
)

// RequestHook is the proxy's extension point for requests it sees in clear.
// It is called for every request on a terminated connection (a host named
// by Config.HTTPRules or Config.TerminateHosts), after the --allow-http
// rules allowed it and before it is forwarded upstream, and for nothing
// else: never for a plain tunnel, never for a refused request. r is the
// request as it will be forwarded: r.URL is absolute (https, the checked
// host and port, the canonical path) and r.Host the host header that will
// be sent; the hook may change r.Header, r.URL.RawQuery and r.Body (set
// r.ContentLength accordingly). host is the terminated host as the client's
// CONNECT named it (lowercase name or address literal, no port).
//
// A non-nil error refuses the request: the client gets a 403 whose body is
// the error's text, and the audit an "http_request" line with reason
// "hook-refused" and the error's text as its detail. The text must
// therefore never hold a secret's value. The hook may be called from many
// goroutines at once.
type RequestHook func(r *http.Request, host string) error

// Refusal codes of terminated requests (X-Sandbox-Refusal and audit).
const (
	reasonHTTPRule      = "http-rule"           // no --allow-http rule matched
	reasonBadPath       = "ambiguous-path"      // the path could be read two ways
	reasonHostMismatch  = "host-mismatch"       // Host differs from the CONNECT target
	reasonHook          = "hook-refused"        // Config.RequestHook refused
	reasonUnverified    = "upstream-unverified" // the upstream's certificate did not verify
	reasonUpstreamError = "upstream-failed"     // any other upstream failure
	// reasonTerminatedDirect: a transparent (non-proxy) connection to a
	// host the proxy terminates, which would pass its rules unjudged.
	reasonTerminatedDirect = "terminated-direct"
)

// l7 is what the proxy needs to terminate TLS and judge requests: fixed
// at New.
type l7 struct {
	rules httprule.Set
	hosts []target // every terminated host and port
	ca    *runCA
	roots *x509.CertPool // nil: the system roots
	hook  RequestHook
}

// newL7 reads the rules and terminated hosts of cfg; nil when there are
// none (the proxy then terminates nothing and makes no CA). It also returns
// the allow-list entries the rules imply: a host a rule names is allowed
// at the address level (its answers are still checked like any other).
func newL7(cfg Config) (*l7, []string, error) {
	rules, err := httprule.ParseSet(cfg.HTTPRules)
	if err != nil {
		return nil, nil, err
	}
	l := &l7{rules: rules, roots: cfg.UpstreamRoots, hook: cfg.RequestHook}
	var implied []string
	for _, t := range rules.Hosts() {
		l.hosts = append(l.hosts, t)
		implied = append(implied, httprule.AllowEntry(t))
	}
	for _, raw := range cfg.TerminateHosts {
		t, err := parseTarget(raw, httprule.DefaultPort)
		if err != nil {
			return nil, nil, fmt.Errorf("proxy: terminate host %q: %w", raw, err)
		}
		if !l.terminates(t) {
			l.hosts = append(l.hosts, t)
		}
	}
	if len(l.hosts) == 0 {
		return nil, nil, nil
	}
	if l.ca, err = newRunCA(); err != nil {
		return nil, nil, err
	}
	return l, implied, nil
}

func (l *l7) terminates(t target) bool {
	if l == nil {
		return false
	}
	for _, h := range l.hosts {
		if h == t {
			return true
		}
	}
	return false
}

// CACertificatePEM is the PEM certificate of the run's CA, which signs what
// the proxy shows for terminated hosts; nil when the proxy terminates
// nothing. Its private key never leaves the proxy.
func (p *Proxy) CACertificatePEM() []byte {
	if p.l7 == nil {
		return nil
	}
	return append([]byte(nil), p.l7.ca.pem...)
}

// TerminatedHosts are the host:port pairs whose TLS the proxy terminates.
func (p *Proxy) TerminatedHosts() []string {
	if p.l7 == nil {
		return nil
	}
	var out []string
	for _, t := range p.l7.hosts {
		out = append(out, t.String())
	}
	return out
}

// HTTPRules are the --allow-http rules in force, as written.
func (p *Proxy) HTTPRules() []string {
	if p.l7 == nil {
		return nil
	}
	var out []string
	for _, r := range p.l7.rules.Rules() {
		out = append(out, r.String())
	}
	return out
}

// terminator serves the terminated connections of one Serve call: an
// HTTP server (HTTP/1.1 and HTTP/2) fed the client's TLS connections, and
// a transport that verifies upstreams.
type terminator struct {
	s     *session
	ln    *connQueue
	srv   *http.Server
	h1    *http.Transport // upstream connections for HTTP/1.1 clients
	h2    *http.Transport // and for HTTP/2 clients (ALPN h2 asked of the upstream)
	fwd   *httputil.ReverseProxy
	conns sync.Map   // *termConn or *termConnH1 -> *decision (the CONNECT's)
	bufs  *sync.Pool // gatherConn's buffers
	plain *sync.Pool // writeBehind's buffers
}

type termKey struct{}

// newTerminator starts serving terminated connections; stop ends it.
func (s *session) newTerminator() *terminator {
	p := s.p
	tm := &terminator{s: s, ln: newConnQueue(), bufs: newGatherBufs(), plain: newBehindBufs()}
	sessions := tls.NewLRUClientSessionCache(256)
	upstream := func(h2 bool) *http.Transport {
		return &http.Transport{
			Proxy:                 nil,
			DialContext:           s.dialTransport,
			TLSClientConfig:       &tls.Config{RootCAs: p.l7.roots, MinVersion: tls.VersionTLS12, ClientSessionCache: sessions},
			ForceAttemptHTTP2:     h2,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   256,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			HTTP2:                 &http.HTTP2Config{MaxReadFrameSize: upstreamFrameSize},
		}
	}
	tm.h1, tm.h2 = upstream(false), upstream(true)
	tm.fwd = &httputil.ReverseProxy{
		Rewrite:   tm.rewrite,
		Transport: tm,
		// Streams (no Content-Length, text/event-stream) are flushed at
		// once by ReverseProxy itself; a response of known length is
		// flushed every 10 ms rather than after every read, which would
		// make one TLS record and one write per upstream record.
		FlushInterval: 10 * time.Millisecond,
		BufferPool:    newCopyBuffers(copyBufferSize),
		ErrorLog:      slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ErrorHandler:  tm.upstreamError,
	}
	tm.fwd.ModifyResponse = p.respHook
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	tm.srv = &http.Server{
		Protocols:         protos,
		Handler:           http.HandlerFunc(tm.serve),
		ReadHeaderTimeout: p.readHeaderTimeout,
		IdleTimeout:       p.idleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if d, ok := tm.conns.Load(c); ok {
				ctx = context.WithValue(ctx, termKey{}, d)
			}
			return ctx
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				tm.conns.Delete(c)
			}
		},
	}
	go func() { _ = tm.srv.Serve(tm.ln) }()
	return tm
}

func (tm *terminator) stop() {
	_ = tm.srv.Close()
	tm.h1.CloseIdleConnections()
	tm.h2.CloseIdleConnections()
}

// RoundTrip forwards over the transport of the client's protocol: an
// HTTP/2 client's requests go to the upstream over HTTP/2 when it offers
// it, an HTTP/1.1 client's over HTTP/1.1 (for bulk downloads HTTP/1.1 is
// the faster of the two through the proxy, and each side keeps what it
// chose).
func (tm *terminator) RoundTrip(r *http.Request) (*http.Response, error) {
	if v, _ := r.Context().Value(l7Key{}).(*l7Verdict); v != nil && v.h2 {
		return tm.h2.RoundTrip(r)
	}
	return tm.h1.RoundTrip(r)
}

// terminate answers an allowed CONNECT to a terminated host: it takes the
// client's connection, completes the TLS handshake with a certificate of
// the run CA for the CONNECT's host (whatever name the client's SNI
// says) within the proxy's ReadHeaderTimeout (a client that does not
// finish it is closed, as http.Server closes one), and hands the
// connection to the terminator's server as a termConn: served as HTTP/2
// when the client chose h2 (by its preface), as HTTP/1.1 otherwise;
// either way its requests are judged one by one. No upstream connection
// is opened here: each forwarded request dials (or reuses) one through
// the checked dialer.
func (s *session) terminate(w http.ResponseWriter, r *http.Request, d *decision) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeResponse(w, failedResponse(r, "CONNECT "+r.URL.Host, errors.New("the connection cannot carry a tunnel")))
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		s.p.log.Debug("connect: hijack", "err", err)
		return
	}
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		client.Close()
		return
	}
	var raw net.Conn = client
	if n := buf.Reader.Buffered(); n > 0 {
		b, _ := buf.Reader.Peek(n)
		raw = &prefixConn{Conn: client, r: io.MultiReader(strings.NewReader(string(b)), client)}
	}
	host := d.t.Host()
	gc := &gatherConn{Conn: raw, bufs: s.term.bufs}
	tc := tls.Server(gc, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.p.l7.ca.leaf(host)
		},
	})
	// The handshake is bounded as http.Server bounds one.
	_ = tc.SetDeadline(time.Now().Add(s.p.readHeaderTimeout))
	if err := tc.HandshakeContext(s.ctx); err != nil {
		s.p.log.Debug("terminate: TLS handshake", "host", d.t.String(), "err", err)
		tc.Close()
		return
	}
	_ = tc.SetDeadline(time.Time{})
	var c net.Conn = newTermConn(tc, gc, s.term.plain)
	if tc.ConnectionState().NegotiatedProtocol != "h2" {
		c = &termConnH1{c.(*termConn)}
	}
	s.term.conns.Store(c, d)
	if !s.term.ln.push(c) {
		s.term.conns.Delete(c)
		c.Close()
	}
}

// prefixConn is a connection whose first bytes were already read.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// connQueue is a net.Listener that returns the connections pushed to it.
type connQueue struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnQueue() *connQueue {
	return &connQueue{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (q *connQueue) push(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.done:
		return false
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return &net.UnixAddr{Name: "terminated", Net: "unix"} }

// hostHeader is the Host header a request to t carries.
func hostHeader(t target) string {
	if t.Port() == 443 {
		if t.IsAddr() && t.Addr().Is6() {
			return "[" + t.Host() + "]"
		}
		return t.Host()
	}
	return t.String()
}

// upstreamURL is the URL a judged request is forwarded to: the checked
// host and port, the canonical path, the query as sent.
func upstreamURL(scheme string, d *decision, canonical, rawQuery string) *url.URL {
	return &url.URL{Scheme: scheme, Host: d.t.String(), Path: canonical, RawQuery: rawQuery}
}

// upstreamFrameSize is the largest HTTP/2 frame the proxy accepts from a
// terminated host (SETTINGS_MAX_FRAME_SIZE; 16 KiB when not said). A
// download in 16 KiB frames costs the proxy (and the host) a frame's
// work, a wake-up of the reading goroutine and a flow-control update
// every 16 KiB; in 256 KiB frames the terminated download of make bench
// went from 0.60x to 0.79x of a tunnel in one interleaved run. The price:
// an upstream connection keeps a read buffer as large as the largest frame
// its host sent, at most this.
const upstreamFrameSize = 256 << 10

// copyBufferSize is the size of the buffers a terminated response is
// copied through.
const copyBufferSize = 256 << 10

// copyBuffers is an httputil.BufferPool of copyBufferSize buffers.
type copyBuffers struct{ p sync.Pool }

func newCopyBuffers(size int) *copyBuffers {
	return &copyBuffers{p: sync.Pool{New: func() any { b := make([]byte, size); return &b }}}
}

func (c *copyBuffers) Get() []byte  { return *c.p.Get().(*[]byte) }
func (c *copyBuffers) Put(b []byte) { c.p.Put(&b) }
