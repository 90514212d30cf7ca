package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The proxy's own forwarder of plain-HTTP requests (docs/egress.md,
// "Speed"). httputil.ReverseProxy over http.Transport hands every request
// to the transport's write goroutine and every answer back from its read
// goroutine: four goroutine wake-ups per request, which at 500 concurrent
// connections on 2 cores made the Go scheduler the largest cost of the
// node-wide proxy. forwardPlain writes the request and relays the answer
// from the handler's own goroutine.
//
// It takes only the simplest requests (plainForwardable): GET and HEAD
// with no body, no upgrade, no Expect, no trailers and a query that
// ReverseProxy would leave as it is. Everything else still goes through
// ReverseProxy, whose transport dials through the same session.dial.
// For the requests it takes, it does what ReverseProxy with an empty
// Rewrite did: hop-by-hop headers (and those the Connection header names)
// and Forwarded/X-Forwarded-* removed from the request, hop-by-hop headers
// removed from the answer, no User-Agent added, 1xx answers passed on,
// trailers passed on, an answer cut short upstream cut short to the
// client (http.ErrAbortHandler). Not done, unlike http.Transport: it asks
// for no gzip on the client's behalf and never decompresses, so the client
// gets the upstream's bytes as they are.

// Idle plain-forwarding connections: the same bounds as the transport's
// pool (maxIdleUpstream*), closed after plainIdleTimeout unused (checked
// every plainSweepEvery, so at most the sum).
const (
	plainIdleTimeout = 90 * time.Second
	plainSweepEvery  = 15 * time.Second
	max1xx           = 5 // informational answers passed on per request, as http.Transport
)

// errStale is an exchange on a pooled connection that failed before any
// answer byte came: the upstream had closed it while it was idle.
var errStale = errors.New("proxy: pooled upstream connection was closed")

// plainForwardable reports whether forwardPlain may take r (see above);
// others go through ReverseProxy.
func (s *session) plainForwardable(r *http.Request) bool {
	return r.URL.Scheme == "http" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		r.ContentLength == 0 && (r.Body == nil || r.Body == http.NoBody) &&
		len(r.TransferEncoding) == 0 && r.Trailer == nil &&
		r.Header["Upgrade"] == nil && r.Header["Expect"] == nil &&
		(r.URL.RawQuery == "" || !s.reencodeQuery && cleanQuery(r.URL.RawQuery))
}

// reencodesQuery reports whether GODEBUG names urlmaxqueryparams: then
// ReverseProxy re-encodes every query, and only it may forward one.
func reencodesQuery() bool {
	return strings.Contains(os.Getenv("GODEBUG"), "urlmaxqueryparams")
}

// cleanQuery reports whether ReverseProxy (Rewrite set) would forward the
// query q unchanged: no ';', only whole %XX escapes, at most 10000
// parameters (httputil's cleanQueryParams).
func cleanQuery(q string) bool {
	if strings.Count(q, "&") >= 10000 || strings.IndexByte(q, ';') >= 0 {
		return false
	}
	for i := strings.IndexByte(q, '%'); i >= 0; i = strings.IndexByte(q, '%') {
		if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
			return false
		}
		q = q[i+3:]
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// removeHopHeaders removes the hop-by-hop headers from h, and those its
// Connection header names (RFC 9110, section 7.6.1): httputil's list.
func removeHopHeaders(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = strings.TrimSpace(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, f := range [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		delete(h, f)
	}
}

// plainOutgoing is the request forwardPlain sends upstream for r.
func plainOutgoing(r *http.Request) *http.Request {
	h := r.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	removeHopHeaders(h)
	if slices.ContainsFunc(r.Header["Te"], func(v string) bool { return hasToken(v, "trailers") }) {
		h["Te"] = []string{"trailers"}
	}
	for _, k := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		delete(h, k)
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // no Go default User-Agent
	}
	return &http.Request{Method: r.Method, URL: r.URL, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Host: r.Host}
}

func hasToken(v, token string) bool {
	for t := range strings.SplitSeq(v, ",") {
		if strings.EqualFold(strings.TrimSpace(t), token) {
			return true
		}
	}
	return false
}

// plainConn is an upstream connection of forwarded plain-HTTP requests.
type plainConn struct {
	uc     *upstreamConn
	ip     netip.Addr // the checked address it is connected to
	br     *bufio.Reader
	bw     *bufio.Writer
	since  time.Time // when it went idle
	reused bool      // taken from the pool
}

// plainPool keeps idle plainConns by target. A connection is reused only
// for a request whose own decision checked the address it is connected to
// (so a name whose answers changed does not reuse an address no longer
// among them), on the same port (the target includes it).
type plainPool struct {
	mu     sync.Mutex
	idle   map[target][]*plainConn
	n      int
	closed bool
}

// get takes the most recently idle connection for d, or returns nil.
func (pp *plainPool) get(d *decision) *plainConn {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	l := pp.idle[d.t]
	for i := len(l) - 1; i >= 0; i-- {
		if pc := l[i]; slices.Contains(d.ips, pc.ip) {
			if l = slices.Delete(l, i, i+1); len(l) == 0 {
				delete(pp.idle, d.t)
			} else {
				pp.idle[d.t] = l
			}
			pp.n--
			pc.reused = true
			return pc
		}
	}
	return nil
}

// put keeps pc for reuse, or closes it when the pool is full or closed.
func (pp *plainPool) put(t target, pc *plainConn) {
	pp.mu.Lock()
	if pp.closed || pp.n >= maxIdleUpstream || len(pp.idle[t]) >= maxIdleUpstreamPerHost {
		pp.mu.Unlock()
		_ = pc.uc.Close()
		return
	}
	pc.since = time.Now()
	pp.idle[t] = append(pp.idle[t], pc)
	pp.n++
	pp.mu.Unlock()
}

// sweep closes the connections idle for longer than plainIdleTimeout, or
// all of them when closing (and then refuses every later put).
func (pp *plainPool) sweep(closing bool) {
	var stale []*plainConn
	pp.mu.Lock()
	pp.closed = pp.closed || closing
	for t, l := range pp.idle {
		keep := l[:0]
		for _, pc := range l {
			if closing || time.Since(pc.since) > plainIdleTimeout {
				stale = append(stale, pc)
			} else {
				keep = append(keep, pc)
			}
		}
		clear(l[len(keep):])
		if len(keep) == 0 {
			delete(pp.idle, t)
		} else {
			pp.idle[t] = keep
		}
	}
	pp.n -= len(stale)
	pp.mu.Unlock()
	for _, pc := range stale {
		_ = pc.uc.Close()
	}
}

// sweepIdle sweeps pp every plainSweepEvery until done is closed, then
// closes every idle connection.
func (pp *plainPool) sweepIdle(done <-chan struct{}) {
	tk := time.NewTicker(plainSweepEvery)
	defer tk.Stop()
	for {
		select {
		case <-done:
			pp.sweep(true)
			return
		case <-tk.C:
			pp.sweep(false)
		}
	}
}

// plainConn returns a pooled connection for d or (fresh, or none pooled)
// dials one through session.dial, whose Control hook re-checks the
// address.
func (s *session) plainConn(ctx context.Context, d *decision, fresh bool) (*plainConn, error) {
	if !fresh {
		if pc := s.plain.get(d); pc != nil {
			return pc, nil
		}
	}
	uc, err := s.dial(ctx, d, d.t.String())
	if err != nil {
		return nil, err
	}
	ip := uc.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
	return &plainConn{uc: uc, ip: ip, br: bufio.NewReader(uc), bw: bufio.NewWriter(uc)}, nil
}

// forwardPlain forwards r, which plainForwardable admitted and d allowed,
// and relays the answer to w. A pooled connection the upstream had closed
// is replaced by a new one once (r is a GET or HEAD without a body, so
// sending it again is safe). A failure before the answer is a 502 (403
// for the dialer's re-check), as ReverseProxy's ErrorHandler wrote.
func (s *session) forwardPlain(w http.ResponseWriter, r *http.Request, d *decision) {
	out := plainOutgoing(r)
	ctx := r.Context()
	for attempt := 0; ; attempt++ {
		pc, err := s.plainConn(ctx, d, attempt > 0)
		if err != nil {
			writeResponse(w, failedResponse(r, r.Method+" "+r.URL.Host, err))
			return
		}
		// The client going away (the server cancels ctx) ends a wait for
		// the upstream, as it ended the transport's.
		stop := context.AfterFunc(ctx, func() { _ = pc.uc.SetDeadline(time.Unix(1, 0)) })
		resp, err := pc.exchange(w, out)
		if err != nil {
			stop()
			_ = pc.uc.Close()
			if errors.Is(err, errStale) && attempt == 0 && ctx.Err() == nil {
				continue
			}
			writeResponse(w, failedResponse(r, r.Method+" "+r.URL.Host, err))
			return
		}
		s.relayPlain(w, pc, d, resp, stop)
		return
	}
}

// exchange writes out and reads its answer, passing 1xx answers (not 101,
// which a request without Upgrade cannot be answered with) on to w.
func (pc *plainConn) exchange(w http.ResponseWriter, out *http.Request) (*http.Response, error) {
	err := out.Write(pc.bw)
	if err == nil {
		err = pc.bw.Flush()
	}
	if err != nil {
		return nil, pc.staleIf(err, true)
	}
	// Nothing at all before end of file (ReadResponse would say
	// "unexpected EOF" either way): a pooled connection the upstream closed.
	if _, err := pc.br.Peek(1); err != nil {
		return nil, pc.staleIf(err, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
	}
	for range max1xx + 1 {
		resp, err := http.ReadResponse(pc.br, out)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 {
			return resp, nil
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return nil, errors.New("the upstream switched protocols without being asked to")
		}
		h := w.Header()
		for k, v := range resp.Header {
			h[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		clear(h)
	}
	return nil, fmt.Errorf("more than %d informational (1xx) answers", max1xx)
}

// staleIf wraps err in errStale when pc came from the pool and closed is
// true (the upstream closed it before answering).
func (pc *plainConn) staleIf(err error, closed bool) error {
	if pc.reused && closed {
		return fmt.Errorf("%w: %w", errStale, err)
	}
	return err
}

// relayPlain writes resp to w and returns pc to the pool when the answer
// ended cleanly and the connection may carry another request. stop
// unregisters forwardPlain's cancellation hook.
func (s *session) relayPlain(w http.ResponseWriter, pc *plainConn, d *decision, resp *http.Response, stop func() bool) {
	removeHopHeaders(resp.Header)
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	if len(resp.Trailer) > 0 {
		h["Trailer"] = []string{strings.Join(slices.Collect(maps.Keys(resp.Trailer)), ", ")}
	}
	w.WriteHeader(resp.StatusCode)
	buf := s.bufs.Get()
	err := copyPlain(w, resp.Body, pc.br, buf)
	s.bufs.Put(buf)
	if err != nil {
		stop()
		_ = pc.uc.Close()
		panic(http.ErrAbortHandler) // the client sees a cut answer, not a short whole one
	}
	_ = resp.Body.Close() // at end of body: fills resp.Trailer
	if len(resp.Trailer) > 0 {
		if f, ok := w.(http.Flusher); ok {
			f.Flush() // chunked, so that the trailers can follow
		}
		for k, vv := range resp.Trailer {
			h[http.TrailerPrefix+k] = vv
		}
	}
	if !stop() || resp.Close || pc.br.Buffered() > 0 {
		_ = pc.uc.Close()
		return
	}
	pc.reused = false
	s.plain.put(d.t, pc)
}

// copyPlain copies body to w, flushing w whenever the upstream has no more
// bytes waiting (br empty), so that no byte waits in the proxy while the
// proxy waits on the upstream, and a small answer goes out in one write.
func copyPlain(w http.ResponseWriter, body io.Reader, br *bufio.Reader, buf []byte) error {
	f, _ := w.(http.Flusher)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
		if f != nil && br.Buffered() == 0 {
			f.Flush()
		}
	}
}
