package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
)

// ServeHTTP answers one client request: a CONNECT becomes a tunnel, an
// absolute-form request is forwarded, and anything else (a request meant
// for an origin server) is a 400 that keeps the connection. Every request
// is decided by check before the proxy opens any connection for it.
func (s *session) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		s.serveConnect(w, r)
	case r.URL.IsAbs():
		s.serveForward(w, r)
	default:
		http.Error(w, "sandbox-run egress proxy: send proxy requests (absolute URL or CONNECT)", http.StatusBadRequest)
	}
}

// serveForward decides an absolute-form request and, when it is allowed,
// forwards it over the checked transport. A redirect in the answer goes
// back to the client as it is.
func (s *session) serveForward(w http.ResponseWriter, r *http.Request) {
	var def uint16
	switch r.URL.Scheme {
	case "http":
		def = 80
	case "https":
		def = 443
	}
	d := s.check(r.Context(), r.Method, r.URL.Host, def, r.URL.Scheme)
	if d.refusal != nil {
		writeResponse(w, refusalResponse(r, d))
		return
	}
	if s.p.l7 != nil && s.p.l7.rules.Covers(d.t) {
		if !s.p.judgePlain(w, r, d) { // plain HTTP to a host with rules: judged the same
			return
		}
	}
	if !s.p.runPlainHook(w, r, d) {
		return
	}
	if s.plainForwardable(r) {
		s.forwardPlain(w, r, d)
		return
	}
	s.forward.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), decisionKey{}, d)))
}

// forwardError answers a forwarded request whose upstream exchange failed
// with a response that says why. A refusal by the dialer's re-check is a
// 403 with its reason code; any other failure is a 502.
func (s *session) forwardError(w http.ResponseWriter, r *http.Request, err error) {
	writeResponse(w, failedResponse(r, r.Method+" "+r.URL.Host, err))
}

// serveConnect decides a CONNECT and, when it is allowed, dials the checked
// address before it answers 200, so a client is told of a failed dial
// while it can still be told, then relays bytes both ways until both
// directions have ended.
func (s *session) serveConnect(w http.ResponseWriter, r *http.Request) {
	d := s.check(r.Context(), http.MethodConnect, r.URL.Host, 0, "")
	if d.refusal != nil {
		writeConnectRefusal(w, r, d)
		return
	}
	if s.p.l7.terminates(d.t) {
		if s.term == nil { // Serve makes it before it serves; never tunnel past the rules
			writeResponse(w, failedResponse(r, "CONNECT "+r.URL.Host, errors.New("the TLS terminator is not running")))
			return
		}
		s.terminate(w, r, d)
		return
	}
	up, err := s.dial(r.Context(), d, d.t.String())
	if err != nil {
		writeResponse(w, failedResponse(r, "CONNECT "+r.URL.Host, err))
		return
	}
	defer up.Close()
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
	defer client.Close()
	if !s.attach(up, client) {
		return
	}
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// Bytes the client sent after its header (a TLS ClientHello, often)
	// may already sit in the server's buffer: they go first.
	if n := buf.Reader.Buffered(); n > 0 {
		b, _ := buf.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	tunnel(client, up)
}

// tunnel copies bytes between client and up until both directions end. A
// direction that reaches end of file half-closes the other side, so a
// client that shuts down its writing half still gets the reply; one that
// fails (Serve closing the upstream, a reset) closes both connections.
func tunnel(client net.Conn, up *upstreamConn) {
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err != nil {
			client.Close()
			up.TCPConn.Close()
			return
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go pipe(up, client)
	pipe(client, up)
	wg.Wait()
}

// failedResponse is the answer to an allowed request whose upstream
// connection or exchange failed.
func failedResponse(r *http.Request, what string, err error) *http.Response {
	status, reason := http.StatusBadGateway, ""
	if errors.Is(err, errDialRefused) {
		status, reason = http.StatusForbidden, reasonDialRefused
	}
	resp := textResponse(r, status, fmt.Sprintf("sandbox-run egress proxy: %s failed: %v\n", what, err))
	if reason != "" {
		resp.Header.Set(RefusalHeader, reason)
	}
	return resp
}

// writeResponse writes resp (built by textResponse) through w.
func writeResponse(w http.ResponseWriter, resp *http.Response) {
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
