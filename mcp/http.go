package mcp

// MCP's Streamable HTTP transport (protocol 2025-06-18 and 2025-11-25) in
// front of the relay: one endpoint, POST for the client's messages, GET
// for the server's stream, DELETE to end a session. Written over net/http
// rather than mcp-go's server, which wants typed handlers where the relay
// needs the raw messages.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/policy"
)

// Defaults of HTTPOptions.
const (
	// DefaultMaxSessions is how many client sessions, each with its own
	// sandboxed server, may run at once.
	DefaultMaxSessions = 8
	// DefaultSessionIdle is how long a session may go without a request in
	// flight or a stream open before it is ended.
	DefaultSessionIdle = 10 * time.Minute
	// DefaultHeaderTimeout is how long a connection may take to send a
	// request's headers: short, since every client sends them at once.
	DefaultHeaderTimeout = 3 * time.Second
	// MinTokenBytes is the shortest bearer token accepted.
	MinTokenBytes = 16
	// HTTPPath is the one path the transport serves.
	HTTPPath = "/mcp"
)

// Bounds of the HTTP server itself.
const (
	httpBodyTimeout    = 30 * time.Second
	httpWriteTimeout   = 30 * time.Second // per SSE event
	httpIdleTimeout    = 60 * time.Second
	httpMaxHeaderBytes = 64 << 10
	httpReadsAtOnce    = 2 // messages read at once per session, and initialize requests at once
)

// Errors of ServeHTTP's options.
var (
	ErrNotLoopback = errors.New("mcp: the listener is not on a loopback address")
	ErrWeakToken   = errors.New("mcp: the bearer token is too short or holds characters a header cannot carry")
)

// HTTPOptions say how to serve the Streamable HTTP transport.
type HTTPOptions struct {
	// Relay is how each session relays; its RunID is ignored (each
	// session has its own) and its ShutdownGrace also bounds how long
	// ending the listener waits for a server to exit.
	Relay Options
	// Token is the bearer token every request must carry
	// (Authorization: Bearer TOKEN); at least MinTokenBytes of visible
	// ASCII. NewToken makes one.
	Token string
	// AllowOrigins are the exact origins (scheme://host[:port]) a browser
	// may call from. A request with any other Origin header is refused
	// (403); requests without one (not from a browser) are not.
	AllowOrigins []string
	// AllowRemote serves a listener on a non-loopback address; without
	// it ServeHTTP refuses one with ErrNotLoopback. On a loopback
	// listener the Host header must name a loopback host too.
	AllowRemote bool
	// MaxSessions bounds the sessions at once; zero means
	// DefaultMaxSessions. One more initialize gets 503.
	MaxSessions int
	// SessionIdle ends a session with no request in flight and no stream
	// open for this long; zero means DefaultSessionIdle.
	SessionIdle time.Duration
	// HeaderTimeout bounds reading a request's headers (for a new
	// connection, from its accept); zero means DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

// NewToken returns a random bearer token (256 bits, base64url).
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// CheckToken refuses a token ServeHTTP would: shorter than MinTokenBytes,
// or holding anything but visible ASCII.
func CheckToken(tok string) error {
	if len(tok) < MinTokenBytes {
		return fmt.Errorf("%w: %d bytes, want at least %d", ErrWeakToken, len(tok), MinTokenBytes)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return fmt.Errorf("%w: byte %d is not visible ASCII", ErrWeakToken, i)
		}
	}
	return nil
}

// ServeHTTP serves server, sandboxed under p, to MCP clients over the
// Streamable HTTP transport on ln, at HTTPPath, until ctx ends. It closes
// ln.
//
// # Guarantees
//
//   - Every request but for a CORS preflight carries the bearer token, or
//     gets 401 before anything else is read; tokens are compared in
//     constant time. A request with an Origin header not in AllowOrigins
//     and not the listener's own (http://localhost:PORT, http://IP:PORT)
//     gets 403 (a browser page cannot reach the server, DNS rebinding or
//     not), as does, on a loopback listener, a Host header naming
//     anything but a loopback host. A refused request's connection is
//     closed.
//   - Connections without the token cannot starve those with it: Accept
//     never waits; a connection that has not yet carried the token must
//     send its headers within HeaderTimeout, and at 256 such connections
//     from one address (1024 in all) the oldest is closed for the new
//     one; once a request on it carried the token, none closes it.
//   - A request's MCP-Protocol-Version may name any protocol version the
//     relay knows, as the TypeScript SDK allows; another gets 400 with the
//     request's id.
//   - Each client session (begun by an initialize, named by the
//     Mcp-Session-Id header the response carries) has its own sandboxed
//     server and its own relay, so the rules, caps and audit of Serve hold
//     per session, and no session sees another's messages. A session ends
//     on DELETE, when its server ends, after SessionIdle without use, and
//     when ctx ends; a request naming an ended or unknown session gets 404.
//   - Bounded: at most MaxSessions sessions (at the cap an initialize ends
//     the least recently used session with no request in flight and no
//     stream open, recorded as mcp_session_evicted, or gets 503 when every
//     session is busy), one message of at most Relay.MaxMessage bytes per
//     POST (413 beyond), read two at a time per session (and two
//     initialize requests at a time), at most Relay.MaxPending requests in
//     flight per session, timeouts on reading headers and bodies and on
//     writing each event.
//   - When ctx ends, every session's sandbox is ended and ServeHTTP
//     returns only once every server has exited.
//
// # Non-guarantees
//
//   - No TLS: on a non-loopback address the token and every message cross
//     the network in clear; put a TLS proxy in front.
//   - Clients on one address share its cap of pending connections: an
//     attacker there who opens connections faster than a token holder
//     sends its headers (a few hundred within that client's round trip)
//     can still close the token holder's before it is trusted.
//   - Connections that carried the token are not capped here.
//   - Streams cannot be resumed (no event ids, Last-Event-ID ignored): a
//     response whose POST stream was cut is lost.
//   - A server message that is not a response goes to the GET stream, or
//     else to an open POST stream; with neither, a notification is
//     dropped and a request is answered with an error for the server.
//   - A request reusing an id in flight is refused here and not audited.
//   - Batches are refused (MCP dropped them in 2025-06-18).
func ServeHTTP(ctx context.Context, ln net.Listener, p policy.Policy, server []string, opts HTTPOptions) error {
	defer ln.Close()
	if err := opts.Relay.Validate(); err != nil {
		return err
	}
	if err := CheckToken(opts.Token); err != nil {
		return err
	}
	if len(server) == 0 {
		return &policy.InvalidError{Field: "command", Reason: "empty", Fix: "name the MCP server after --"}
	}
	tcp, _ := ln.Addr().(*net.TCPAddr)
	loopback := tcp != nil && tcp.IP.IsLoopback()
	if !loopback && !opts.AllowRemote {
		return fmt.Errorf("%w: %s", ErrNotLoopback, ln.Addr())
	}
	h := newHTTPServer(ctx, p, server, opts, loopback)
	h.own = ownOrigins(ln.Addr())
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: h.opts.HeaderTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return h.ctx },
		ConnContext:       withConn,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(newAdmission(ln, pendingPerAddr, pendingTotal)) }()
	go h.reap()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	h.stop()
	srv.Close()
	h.wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// httpServer is the transport's state: the sessions by id.
type httpServer struct {
	ctx      context.Context
	cancel   context.CancelFunc
	p        policy.Policy
	server   []string
	opts     HTTPOptions
	loopback bool
	log      *slog.Logger
	origins  map[string]bool // --allow-origin
	own      map[string]bool // the listener's own origins

	initSem chan struct{} // permits to read an initialize (see post)

	mu       sync.Mutex
	sessions map[string]*httpSession
	wg       sync.WaitGroup // one per session's Serve
	refused  int
}

func newHTTPServer(ctx context.Context, p policy.Policy, server []string, opts HTTPOptions, loopback bool) *httpServer {
	h := &httpServer{p: p, server: server, opts: opts, loopback: loopback, log: opts.Logger,
		origins: map[string]bool{}, sessions: map[string]*httpSession{}, initSem: make(chan struct{}, httpReadsAtOnce)}
	h.ctx, h.cancel = context.WithCancel(ctx)
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.opts.MaxSessions <= 0 {
		h.opts.MaxSessions = DefaultMaxSessions
	}
	if h.opts.SessionIdle <= 0 {
		h.opts.SessionIdle = DefaultSessionIdle
	}
	if h.opts.HeaderTimeout <= 0 {
		h.opts.HeaderTimeout = DefaultHeaderTimeout
	}
	if h.opts.Relay.MaxMessage <= 0 {
		h.opts.Relay.MaxMessage = DefaultMaxMessage
	}
	if h.opts.Relay.MaxPending <= 0 {
		h.opts.Relay.MaxPending = DefaultMaxPending
	}
	for _, o := range opts.AllowOrigins {
		h.origins[o] = true
	}
	return h
}

// stop ends every session: their Serve calls see ctx end and end their
// sandboxes. Under mu, so that no session begins (wg.Add) once wait may
// have begun.
func (h *httpServer) stop() {
	h.mu.Lock()
	h.cancel()
	h.mu.Unlock()
}

// wait waits for every session's server to have exited.
func (h *httpServer) wait() { h.wg.Wait() }

func (h *httpServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if code, why := h.admit(r); code != 0 {
		h.refuse(w, r, code, why)
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.get(w, r)
	case http.MethodDelete:
		h.delete(w, r)
	case http.MethodOptions:
		h.preflight(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE, OPTIONS")
		httpError(w, http.StatusMethodNotAllowed, nil, "sandbox-run: method not allowed")
	}
}

// admit checks the path, Host, Origin and token, in that order; a
// preflight (OPTIONS) carries no token and needs none.
func (h *httpServer) admit(r *http.Request) (int, string) {
	if r.URL.Path != HTTPPath {
		return http.StatusNotFound, "no such endpoint; the MCP endpoint is " + HTTPPath
	}
	if h.loopback && !loopbackHost(r.Host) {
		return http.StatusForbidden, "the Host header does not name a loopback host"
	}
	if o := r.Header.Values("Origin"); len(o) > 1 || (len(o) == 1 && !h.origins[o[0]] && !h.own[strings.ToLower(o[0])]) {
		return http.StatusForbidden, "origin not allowed (--allow-origin)"
	}
	if r.Method == http.MethodOptions {
		return 0, ""
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(h.opts.Token)) != 1 {
		return http.StatusUnauthorized, "missing or wrong bearer token"
	}
	trustConn(r.Context())
	return 0, ""
}

// ownOrigins are the origins of a page served by the listener itself,
// which a browser sends on that page's requests: http://localhost:PORT
// and http://IP:PORT with the listener's address. The listener serves no
// page, but a client speaking for one (a proxy in front, a test suite)
// sends them; accepting them lets in no other site.
func ownOrigins(addr net.Addr) map[string]bool {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	port := fmt.Sprint(tcp.Port)
	own := map[string]bool{"http://" + net.JoinHostPort(tcp.IP.String(), port): true}
	if tcp.IP.IsLoopback() {
		own["http://"+net.JoinHostPort("localhost", port)] = true
	}
	return own
}

// loopbackHost says the Host header names localhost or a loopback IP.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// refuse answers a request admit refused, and says so on the log, the
// first ten times and every thousandth after.
func (h *httpServer) refuse(w http.ResponseWriter, r *http.Request, code int, why string) {
	h.mu.Lock()
	h.refused++
	n := h.refused
	h.mu.Unlock()
	if n <= 10 || n%1000 == 0 {
		h.log.Warn("refused an HTTP request", "status", code, "why", why, "remote", r.RemoteAddr, "refused_total", n)
	}
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandbox-run"`)
	}
	// A refused client gets no idle connection to hold (see httpadmit.go).
	w.Header().Set("Connection", "close")
	httpError(w, code, nil, "sandbox-run: "+why)
}

// preflight answers a CORS preflight from an allowed origin.
func (h *httpServer) preflight(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" {
		w.Header().Set("Access-Control-Allow-Origin", o)
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
		w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID")
		w.Header().Set("Access-Control-Expose-Headers", "Mcp-Session-Id")
		w.Header().Set("Vary", "Origin")
	}
	w.WriteHeader(http.StatusNoContent)
}

// httpError writes a JSON-RPC error as the body of an HTTP error.
func httpError(w http.ResponseWriter, status int, id json.RawMessage, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(errorLine(id, codeForStatus(status), msg, nil))
}

func codeForStatus(status int) int {
	if status == http.StatusBadRequest {
		return -32600
	}
	return codeBusy
}

// corsHeaders lets an allowed browser origin read the response.
func corsHeaders(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" {
		w.Header().Set("Access-Control-Allow-Origin", o)
		w.Header().Set("Access-Control-Expose-Headers", "Mcp-Session-Id")
		w.Header().Set("Vary", "Origin")
	}
}

// accepts says the Accept header lists every one of types (or */*).
func accepts(r *http.Request, types ...string) bool {
	acc := strings.Join(r.Header.Values("Accept"), ",")
	for _, t := range types {
		if !strings.Contains(acc, t) && !strings.Contains(acc, "*/*") {
			return false
		}
	}
	return true
}

// session finds the session a request names: 400 without the header, 404
// for one that does not exist (any more).
func (h *httpServer) session(w http.ResponseWriter, r *http.Request) *httpSession {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		httpError(w, http.StatusBadRequest, nil, "sandbox-run: no Mcp-Session-Id header; begin a session with initialize")
		return nil
	}
	h.mu.Lock()
	s := h.sessions[id]
	h.mu.Unlock()
	if s == nil {
		httpError(w, http.StatusNotFound, nil, "sandbox-run: no such session (ended, or never begun); begin a new one with initialize")
		return nil
	}
	return s
}

// knownVersions are the protocol versions an MCP-Protocol-Version header
// may name: those the relay speaks (see doc.go). As in the TypeScript
// SDK's transport, any known version is accepted, not only the one the
// session negotiated: the header is the transport's, never forwarded to
// the server, which reads the version it negotiated from its own state.
var knownVersions = map[string]bool{
	"2024-10-07": true, "2024-11-05": true, "2025-03-26": true,
	"2025-06-18": true, "2025-11-25": true, "2026-07-28": true,
}

// checkVersion refuses (400) an MCP-Protocol-Version header naming no
// version the relay knows, answering the request id (nil when there is
// none to read). Absent, the version is the negotiated one, as the spec
// says.
func checkVersion(w http.ResponseWriter, r *http.Request, id json.RawMessage) bool {
	v := r.Header.Values("Mcp-Protocol-Version")
	if len(v) == 0 || (len(v) == 1 && knownVersions[v[0]]) {
		return true
	}
	httpError(w, http.StatusBadRequest, id, fmt.Sprintf("sandbox-run: unsupported MCP-Protocol-Version %q; supported: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28", capString(strings.Join(v, ", "))))
	return false
}

// readMessage reads a POST's one JSON-RPC message, compacted onto one
// line. On failure it has answered, but for a JSON message parseEnvelope
// refuses, which it returns with the refusal (see refuseMessage).
func (h *httpServer) readMessage(w http.ResponseWriter, r *http.Request) ([]byte, envelope, error, bool) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		httpError(w, http.StatusUnsupportedMediaType, nil, "sandbox-run: Content-Type must be application/json")
		return nil, envelope{}, nil, false
	}
	if !accepts(r, "application/json", "text/event-stream") {
		httpError(w, http.StatusNotAcceptable, nil, "sandbox-run: Accept must list application/json and text/event-stream")
		return nil, envelope{}, nil, false
	}
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(httpBodyTimeout))
	// The relay reads lines of at most MaxMessage bytes, newline included.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(h.opts.Relay.MaxMessage-1)))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		httpError(w, http.StatusRequestEntityTooLarge, nil, fmt.Sprintf("sandbox-run: message over %d bytes (--max-message)", h.opts.Relay.MaxMessage))
		return nil, envelope{}, nil, false
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, nil, "sandbox-run: reading the body: "+err.Error())
		return nil, envelope{}, nil, false
	}
	var line bytes.Buffer
	if err := json.Compact(&line, body); err != nil {
		httpError(w, http.StatusBadRequest, nil, "sandbox-run: invalid JSON: "+err.Error())
		return nil, envelope{}, nil, false
	}
	if bytes.HasPrefix(line.Bytes(), []byte("[")) {
		httpError(w, http.StatusBadRequest, nil, "sandbox-run: a JSON-RPC batch; MCP over HTTP takes one message per POST")
		return nil, envelope{}, nil, false
	}
	e, err := parseEnvelope(line.Bytes())
	return line.Bytes(), e, err, true
}

// refuseMessage answers a message parseEnvelope refused (perr). Within a
// session the relay refuses it too, and audits it: when its id could be
// read, the POST waits for that refusal as for any response; otherwise
// (and outside a session) it gets 400 at once.
func (h *httpServer) refuseMessage(w http.ResponseWriter, r *http.Request, s *httpSession, line []byte, e envelope, perr error, release func()) {
	if s != nil && e.idKey != "" {
		corsHeaders(w, r)
		s.request(w, r, line, e, release)
		return
	}
	if s != nil {
		s.toRelay(line) // audited; its answer, under a null id, goes nowhere
	}
	var id json.RawMessage
	if e.idKey != "" {
		id = e.id
	}
	httpError(w, http.StatusBadRequest, id, "sandbox-run: "+perr.Error())
}

func (h *httpServer) post(w http.ResponseWriter, r *http.Request) {
	// Messages are read under a permit, per session (or, for initialize,
	// shared), held until the relay has taken the message: the bytes held
	// stay a few messages per session, whatever the connections.
	sem := h.initSem
	var s *httpSession
	if r.Header.Get("Mcp-Session-Id") != "" {
		if s = h.session(w, r); s == nil {
			return
		}
		sem = s.sem
	}
	select {
	case sem <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	release := sync.OnceFunc(func() { <-sem })
	defer release()
	line, e, perr, ok := h.readMessage(w, r)
	if !ok || !checkVersion(w, r, e.id) {
		return
	}
	if perr != nil {
		h.refuseMessage(w, r, s, line, e, perr, release)
		return
	}
	isInit := e.kind == kindRequest && e.method == "initialize"
	switch {
	case isInit && s != nil:
		httpError(w, http.StatusBadRequest, e.id, "sandbox-run: initialize within a session; send it without Mcp-Session-Id to begin a new one")
		return
	case isInit:
		if s = h.newSession(w, r, e); s == nil {
			return
		}
	case s == nil:
		httpError(w, http.StatusBadRequest, nil, "sandbox-run: no Mcp-Session-Id header; begin a session with initialize")
		return
	}
	corsHeaders(w, r)
	if e.kind != kindRequest {
		// A notification or a response: the relay takes it from here.
		s.touch(1)
		err := s.toRelay(line)
		s.touch(-1)
		if err != nil {
			httpError(w, http.StatusNotFound, nil, "sandbox-run: the session has ended")
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	s.request(w, r, line, e, release)
}

// get opens the session's stream for server-initiated messages.
func (h *httpServer) get(w http.ResponseWriter, r *http.Request) {
	if !accepts(r, "text/event-stream") {
		httpError(w, http.StatusNotAcceptable, nil, "sandbox-run: Accept must list text/event-stream")
		return
	}
	s := h.session(w, r)
	if s == nil || !checkVersion(w, r, nil) {
		return
	}
	st := newStream("")
	s.mu.Lock()
	if s.get != nil {
		s.mu.Unlock()
		httpError(w, http.StatusConflict, nil, "sandbox-run: this session already has a GET stream open")
		return
	}
	s.get = st
	s.busy++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.get = nil
		s.mu.Unlock()
		s.touch(-1)
	}()
	corsHeaders(w, r)
	s.stream(w, r, st)
}

// delete ends a session at the client's word.
func (h *httpServer) delete(w http.ResponseWriter, r *http.Request) {
	s := h.session(w, r)
	if s == nil || !checkVersion(w, r, nil) {
		return
	}
	h.end(s)
	corsHeaders(w, r)
	w.WriteHeader(http.StatusNoContent)
}

// end forgets a session and ends it: its relay sees the client's input
// end, which closes the server's input; the server then has
// Relay.ShutdownGrace to exit before its sandbox is ended.
func (h *httpServer) end(s *httpSession) {
	h.mu.Lock()
	if h.sessions[s.id] == s {
		delete(h.sessions, s.id)
	}
	h.mu.Unlock()
	s.in.CloseWithError(errSessionClosed)
}

var errSessionClosed = errors.New("the session was ended")

// newSession begins a session for an initialize request: its own relay
// and sandboxed server. At MaxSessions it first ends the least recently
// used session that has nothing in flight (see evict). On failure it has
// answered.
func (h *httpServer) newSession(w http.ResponseWriter, r *http.Request, e envelope) *httpSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		httpError(w, http.StatusServiceUnavailable, e.id, "sandbox-run: shutting down")
		return nil
	}
	if len(h.sessions) >= h.opts.MaxSessions && !h.evict() {
		w.Header().Set("Retry-After", "10")
		httpError(w, http.StatusServiceUnavailable, e.id,
			fmt.Sprintf("sandbox-run: %d sessions open (--max-sessions), each with a request or stream in flight; end one with DELETE or wait", h.opts.MaxSessions))
		return nil
	}
	pr, pw := io.Pipe()
	s := &httpSession{id: NewToken(), runID: newRunID(), client: "http " + r.RemoteAddr, in: pw, log: h.log, waiting: map[string]*sseStream{},
		done: make(chan struct{}), sem: make(chan struct{}, httpReadsAtOnce), maxPending: h.opts.Relay.MaxPending, maxLine: 2 * h.opts.Relay.MaxMessage,
		lastUsed: time.Now()}
	h.sessions[s.id] = s
	opts := h.opts.Relay
	opts.RunID = s.runID
	opts.Client = s.client
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		_, err := Serve(h.ctx, h.p, h.server, pr, s, opts)
		if err != nil && h.ctx.Err() == nil {
			h.log.Warn("an MCP session ended", "error", err.Error())
		}
		pr.CloseWithError(errSessionClosed)
		h.end(s)
		close(s.done)
	}()
	w.Header().Set("Mcp-Session-Id", s.id)
	return s
}

// evict ends the least recently used session that has no request in
// flight and no stream open, to make room for a new one, and records it
// in the audit (mcp_session_evicted, under the evicted session's run id).
// Clients that never DELETE their sessions (the conformance suite opens
// one per scenario) would otherwise lock every new client out for
// SessionIdle. False when every session is busy. Under mu.
func (h *httpServer) evict() bool {
	var lru *httpSession
	var idle time.Duration
	for _, s := range h.sessions {
		if d := s.idleFor(); d > 0 && (lru == nil || d > idle) {
			lru, idle = s, d
		}
	}
	if lru == nil {
		return false
	}
	delete(h.sessions, lru.id)
	lru.in.CloseWithError(errSessionClosed)
	why := fmt.Sprintf("--max-sessions %d reached: the least recently used session, idle %s, was ended for a new one", h.opts.MaxSessions, idle.Round(time.Millisecond))
	h.log.Warn("ended an MCP session for a new one", "why", why, "run_id", lru.runID)
	if h.opts.Relay.Audit != nil {
		a := &auditor{w: h.opts.Relay.Audit, runID: lru.runID, now: time.Now, maxLine: h.opts.Relay.AuditLineMax}
		a.write(Record{Time: time.Now().UTC(), Event: "mcp_session_evicted", Client: lru.client, Reason: why})
	}
	return true
}

// reap ends sessions left unused for SessionIdle, until ctx ends.
func (h *httpServer) reap() {
	every := min(h.opts.SessionIdle/2, 30*time.Second)
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		var idle []*httpSession
		h.mu.Lock()
		for _, s := range h.sessions {
			if s.idleFor() > h.opts.SessionIdle {
				idle = append(idle, s)
			}
		}
		h.mu.Unlock()
		for _, s := range idle {
			h.log.Warn("ended an MCP session left idle", "idle", h.opts.SessionIdle.String())
			h.end(s)
		}
	}
}
