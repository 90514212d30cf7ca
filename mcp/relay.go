package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxMessage is the largest JSON-RPC message, in bytes, the relay
// accepts from either side when Options.MaxMessage is zero.
const DefaultMaxMessage = 32 << 20

// DefaultMaxPending is how many requests may wait for an answer at once,
// in each direction, when Options.MaxPending is zero.
const DefaultMaxPending = 1024

// Error codes the relay answers with itself. A refused tool is "invalid
// params", as MCP prescribes for an unknown tool.
const (
	codeRefused    = codeInvalidParams
	codeServerGone = codeInternalError
	codeBusy       = -32000 // implementation-defined: too many pending requests
)

// call is a client request the server has not answered yet.
type call struct {
	clientID  json.RawMessage // as the client wrote it
	clientKey string
	method    string
	kind      string // KindTool, KindPrompt, KindResource or ""
	name      string // the tool's or prompt's name, or the resource's URI
	nameSent  string // a name or URI that was missing or not a string, as sent
	uriSent   string // a resource URI as sent, when name is its canonical form
	uriRaw    []byte // its JSON in the request, replaced by name when forwarded
	relayID   uint64 // the id the server sees, once forwarded
	start     time.Time

	paramBytes int
	argBytes   int
	args       json.RawMessage // kept only when the audit records values
	argsNote   string          // why args were not kept
	redacted   int

	caps clientCaps // declared with this request (protocol 2026-07-28)
}

// srvCall is a request from the server the client has not answered yet.
type srvCall struct {
	method string
	start  time.Time
}

// relay passes JSON-RPC messages between one client and one server,
// filtering lists and refusing requests the rules hide. It holds at most
// one message per direction in memory, plus one small record per pending
// request (at most maxPending each way, each with at most maxAuditArgs
// bytes of arguments): a side that floods the other is slowed down by the
// pipe, never buffered.
//
// Requests reach the server under ids the relay assigns (1, 2, 3, ...),
// and answers go back under the client's own id, as it wrote it. So the
// server never sees two pending requests with one id, whatever its JSON
// library does to numbers, and a client id the relay did not issue cannot
// be answered.
type relay struct {
	rules       Rules
	audit       *auditor
	auditArgs   argsMode
	maxMessage  int
	maxPending  int
	denyFromSrv map[string]bool
	log         *slog.Logger

	clientMu  sync.Mutex // serialises writes to the client
	clientOut io.Writer
	// clientShut, under clientMu, is set once Serve has returned: its
	// caller owns the client's output again (it may answer the client
	// itself), so a request read late gets nothing from the relay.
	clientShut bool
	clientBuf  []byte     // encodes messages to the client, under clientMu
	serverMu   sync.Mutex // serialises writes to the server
	serverIn   io.Writer
	serverBuf  []byte // encodes messages to the server, under serverMu

	mu         sync.Mutex
	pending    map[uint64]*call
	byClient   map[string]uint64 // client id key -> the relay's id
	nextID     uint64
	fromSrv    map[string]*srvCall // server request id key -> record
	caps       clientCaps          // declared in initialize
	pin        pinState            // tool definitions seen and pinned
	ended      bool                // the server's output has ended
	clientGone atomic.Bool
	endReason  string // why, for the errors pending calls get

	overOnce sync.Once
	over     chan struct{} // closed when the relay ends the session
	overErr  error
}

// streams are the four ends the relay joins.
type streams struct {
	clientIn  io.Reader
	clientOut io.Writer
	serverIn  io.WriteCloser
	serverOut io.Reader
}

func (r *relay) init() {
	if r.pending == nil {
		r.pending = map[uint64]*call{}
		r.byClient = map[string]uint64{}
		r.fromSrv = map[string]*srvCall{}
	}
	if r.over == nil {
		r.over = make(chan struct{})
	}
	if r.maxPending <= 0 {
		r.maxPending = DefaultMaxPending
	}
}

// endSession records why the relay gives up on the session and signals
// Serve to end the server. The first reason wins.
func (r *relay) endSession(err error) {
	r.init()
	r.overOnce.Do(func() {
		r.overErr = err
		r.setEndReason(err.Error())
		close(r.over)
	})
}

// sessionErr is the reason the relay ended the session, or nil.
func (r *relay) sessionErr() error {
	select {
	case <-r.over:
		return r.overErr
	default:
		return nil
	}
}

// run relays until the server's output ends, then answers every pending
// client request with an error. When the client's input ends first, the
// server's input is closed (the MCP way of asking a stdio server to exit)
// and clientEOF, when set, is called; run still returns only once the
// server's output has ended. It returns errServerEnded when the server's
// output ended while the client was still connected, and the relay's own
// reason when it ended the session (see endSession).
func (r *relay) run(ctx context.Context, s streams, clientEOF func()) error {
	r.init()
	r.clientOut = s.clientOut
	r.serverIn = s.serverIn
	go func() {
		r.clientToServer(s.clientIn)
		// Set before the server can see EOF, so before it can exit of it.
		r.clientGone.Store(true)
		s.serverIn.Close()
		if clientEOF != nil {
			clientEOF()
		}
	}()
	err := r.serverToClient(s.serverOut)
	if serr := r.sessionErr(); serr != nil {
		err = serr
	} else if errors.Is(err, errServerEnded) && r.clientGone.Load() {
		// The client left first: a server that ends now does as asked.
		err = nil
	}
	r.failPending()
	return err
}

var errServerEnded = errors.New("server ended")

// ErrSessionEnded means the relay itself ended the session: a message it
// could not relay safely (a server line over the limit, a client line over
// the limit whose id could not be read). The server was ended with it.
var ErrSessionEnded = errors.New("mcp: the relay ended the session")

// setEndReason records why the server's output will end, before it does.
func (r *relay) setEndReason(s string) {
	r.mu.Lock()
	if r.endReason == "" {
		r.endReason = s
	}
	r.mu.Unlock()
}

func (r *relay) writeClient(b []byte) error {
	r.clientMu.Lock()
	defer r.clientMu.Unlock()
	if r.clientShut {
		return errClientShut
	}
	_, err := r.clientOut.Write(withNewline(b))
	return err
}

// shutClient ends the relay's writes to the client: after it returns,
// nothing more is written there.
func (r *relay) shutClient() {
	r.clientMu.Lock()
	r.clientShut = true
	r.clientMu.Unlock()
}

var errClientShut = errors.New("mcp: the session is over: nothing more is written to the client")

func (r *relay) writeServer(b []byte) error {
	r.serverMu.Lock()
	defer r.serverMu.Unlock()
	_, err := r.serverIn.Write(withNewline(b))
	return err
}

// writeMsg writes m to w, encoded in *buf (reused from one message to
// the next, at most a chunk: see emitter): every message the relay passes
// on is its own encoding of what it judged, never the bytes it read. The
// caller holds the lock that guards w and *buf.
func writeMsg(w io.Writer, buf *[]byte, m outMsg) error {
	em := emitter{w: w, buf: (*buf)[:0]}
	m.emit(&em)
	em.flush()
	*buf = em.buf
	return em.err
}

func (r *relay) sendClient(m outMsg) error {
	r.clientMu.Lock()
	defer r.clientMu.Unlock()
	if r.clientShut {
		return errClientShut
	}
	return writeMsg(r.clientOut, &r.clientBuf, m)
}

func (r *relay) sendServer(m outMsg) error {
	r.serverMu.Lock()
	defer r.serverMu.Unlock()
	return writeMsg(r.serverIn, &r.serverBuf, m)
}

// clientToServer forwards the client's messages until its input ends.
func (r *relay) clientToServer(in io.Reader) {
	br := bufio.NewReaderSize(in, 64<<10)
	var scratch []byte
	for {
		var hs headScan
		line, err := readLine(br, r.maxMessage, &hs, &scratch)
		if errors.Is(err, errTooLong) {
			if !r.clientTooLong(&hs) {
				return
			}
			continue
		}
		if len(line) > 0 {
			if werr := r.fromClient(line); werr != nil {
				r.log.Debug("relaying a client message", "error", werr)
			}
		}
		if err != nil {
			return
		}
	}
}

// clientTooLong answers a client line over the limit, which was skipped
// unread but for its top-level id and method (hs). It returns false when
// the session cannot go on: the line was a request whose id could not be
// read, so its caller would wait forever.
func (r *relay) clientTooLong(hs *headScan) bool {
	id, method, ok := hs.result()
	msg := fmt.Sprintf("sandbox-run: message over %d bytes dropped (--max-message)", r.maxMessage)
	switch {
	case ok && id != nil:
		c := &call{clientID: id, method: method, start: time.Now(), paramBytes: r.maxMessage}
		r.audit.call(c, outcomeTooLarge, codeInvalidRequest, "--max-message")
		r.writeClient(errorLine(id, codeInvalidRequest, msg, nil))
		return true
	case ok && method != "":
		r.log.Warn("client notification over the size limit dropped", "method", method, "limit", r.maxMessage)
		return true
	}
	err := fmt.Errorf("%w: the client sent a message over %d bytes whose id could not be read, so it could not be answered",
		ErrSessionEnded, r.maxMessage)
	r.log.Warn(err.Error())
	r.endSession(err)
	return false
}

// fromClient handles one line from the client.
func (r *relay) fromClient(line []byte) error {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return nil
	}
	if trimmed[0] == '[' {
		// A batch (MCP 2025-03-26) is split into its members, so that
		// every request in it meets the rules.
		var batch []json.RawMessage
		if err := json.Unmarshal(trimmed, &batch); err != nil {
			return r.writeClient(errorLine(nil, codeParseError, "sandbox-run: invalid JSON batch", nil))
		}
		for _, m := range batch {
			if err := r.fromClientMessage(m); err != nil {
				return err
			}
		}
		return nil
	}
	return r.fromClientMessage(trimmed)
}

func (r *relay) fromClientMessage(raw []byte) error {
	e, err := parseEnvelope(raw)
	if err != nil {
		return r.refuseMalformed(e, err)
	}
	switch e.kind {
	case kindRequest:
		return r.request(e)
	case kindNotification:
		if e.method == notificationCancelled {
			m, ok := r.cancelled(e)
			if !ok {
				return nil
			}
			return r.sendServer(m)
		}
		return r.sendServer(e.out())
	default:
		return r.clientResponse(e)
	}
}

// refuseMalformed answers a client message the relay cannot read as one
// meaning: the client gets an error (under its id when that could be read
// and is valid), the audit a refusal naming what was wrong.
func (r *relay) refuseMalformed(e envelope, err error) error {
	code := codeInvalidRequest
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) {
		code = codeParseError
	}
	id := json.RawMessage(nil)
	if e.idKey != "" {
		id = e.id
	}
	c := &call{clientID: bytes.Clone(id), method: e.method, start: time.Now(), paramBytes: len(e.obj["params"])}
	if c.method == "" && e.obj.has("method") {
		c.nameSent = capString(string(e.obj["method"]))
	}
	if t, ok := targets[e.method]; ok && e.p != nil {
		// Say what it asked for (a request without an id, say).
		c.kind, c.name = t.kind, e.p.str(t.member)
		if e.method == methodToolsCall {
			r.keepArgs(c, e.p["arguments"])
		}
	}
	r.audit.call(c, outcomeRefused, code, "malformed: "+err.Error())
	return r.writeClient(errorLine(id, code, "sandbox-run: "+err.Error(), nil))
}

// request judges a client request and, unless refused, forwards it under
// the relay's own id.
func (r *relay) request(e envelope) error {
	c, ref := r.judge(e)
	if ref != nil {
		r.audit.call(c, outcomeRefused, ref.code, ref.rule)
		return r.writeClient(errorLine(c.clientID, ref.code, ref.msg, ref.data))
	}
	r.mu.Lock()
	var busy *refusal
	switch {
	case r.ended:
		busy = &refusal{code: codeServerGone, msg: "sandbox-run: the MCP server has ended: " + r.endReason, rule: ""}
	case r.byClient[c.clientKey] != 0:
		busy = &refusal{code: codeInvalidRequest, rule: "duplicate id",
			msg: fmt.Sprintf("sandbox-run: a request with id %s is already pending; ids must be unique", capString(string(c.clientID)))}
	case len(r.pending) >= r.maxPending:
		busy = &refusal{code: codeBusy, rule: "--max-pending " + strconv.Itoa(r.maxPending),
			msg: fmt.Sprintf("sandbox-run: %d requests already pending (--max-pending); refused", r.maxPending)}
	}
	if busy != nil {
		ended := r.ended
		r.mu.Unlock()
		outcome := outcomeRefused
		if ended {
			outcome = outcomeServerEnded
		}
		r.audit.call(c, outcome, busy.code, busy.rule)
		return r.writeClient(errorLine(c.clientID, busy.code, busy.msg, nil))
	}
	r.nextID++
	id := r.nextID
	r.pending[id] = c
	r.byClient[c.clientKey] = id
	c.relayID = id
	r.mu.Unlock()
	// On its way to the file before the server can act on the call.
	r.audit.callStart(c)
	m := e.out()
	m.id = strconv.AppendUint(nil, id, 10)
	m.params = forwardedParams(m.params, c)
	return r.sendServer(m)
}

// cancelled forgets a request the client gave up on: the server need not
// answer it, and an answer that still comes is dropped. It returns the
// notification with the request's id as the server knows it, and false
// when it names no pending request (the server would read it as another).
func (r *relay) cancelled(e envelope) (outMsg, bool) {
	p, err := e.params()
	if err != nil {
		return outMsg{}, false
	}
	key, err := idKey(p["requestId"])
	if err != nil {
		return outMsg{}, false
	}
	r.mu.Lock()
	id := r.byClient[key]
	c := r.pending[id]
	delete(r.pending, id)
	delete(r.byClient, key)
	r.mu.Unlock()
	if c == nil {
		return outMsg{}, false
	}
	r.audit.call(c, outcomeCancelled, 0, "")
	m := e.out()
	m.params = splice(m.params, p["requestId"], strconv.AppendUint(nil, id, 10))
	return m, true
}

// clientResponse passes the client's answer to a server request, and
// drops an answer to a request the server did not make.
func (r *relay) clientResponse(e envelope) error {
	r.mu.Lock()
	sc := r.fromSrv[e.idKey]
	delete(r.fromSrv, e.idKey)
	r.mu.Unlock()
	if sc == nil {
		r.log.Warn("dropped a client response to no pending server request", "id", capString(string(e.id)))
		return nil
	}
	outcome, code := responseOutcome(e)
	r.audit.serverRequest(sc, outcome, code, "")
	return r.sendServer(e.out())
}

// serverToClient forwards the server's messages until its output ends.
func (r *relay) serverToClient(in io.Reader) error {
	br := bufio.NewReaderSize(in, 64<<10)
	dropped := 0
	var scratch []byte
	for {
		line, err := readLine(br, r.maxMessage, nil, &scratch)
		if errors.Is(err, errTooLong) {
			// Its id is unknown, so a call waiting for it would wait
			// forever, and the rest of the line may never come: end the
			// session, and the server with it.
			err := fmt.Errorf("%w: the server sent a message over %d bytes (--max-message)", ErrSessionEnded, r.maxMessage)
			r.endSession(err)
			return err
		}
		if len(line) > 0 {
			if werr := r.fromServer(line, &dropped); werr != nil {
				// The client is gone; keep draining so the server is not
				// blocked, until it ends.
				r.log.Debug("writing to the client", "error", werr)
			}
		}
		if err != nil {
			return errServerEnded
		}
	}
}

func (r *relay) fromServer(line []byte, dropped *int) error {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return nil
	}
	e, err := parseEnvelope(trimmed)
	if err != nil {
		return r.refuseServer(e, err, dropped)
	}
	switch e.kind {
	case kindRequest:
		return r.serverRequest(e)
	case kindNotification:
		return r.serverNotification(e)
	}
	return r.serverResponse(e, dropped)
}

// refuseServer handles a server line the relay does not pass on. Stray
// output (not a JSON object) is dropped, and said so on the relay's log.
// A JSON object refused by the rules of parseEnvelope (ambiguous, a near
// miss of a member name, a request method without an id...) is audited
// too: a request whose id could be read gets an error, a response to a
// pending call fails that call (the client would wait for it forever),
// anything else is dropped (mcp_dropped). None reaches the client.
func (r *relay) refuseServer(e envelope, err error, dropped *int) error {
	if e.obj == nil && !errors.Is(err, errAmbiguous) {
		*dropped++
		if *dropped <= 10 || *dropped%1000 == 0 {
			r.log.Warn("dropped a line from the server that is not a valid JSON-RPC message",
				"error", err.Error(), "dropped_total", *dropped)
		}
		return nil
	}
	rule := "malformed: " + err.Error()
	switch {
	case e.method != "" && e.idKey != "" && !e.obj.has("result") && !e.obj.has("error"):
		r.audit.serverRequest(&srvCall{method: e.method, start: time.Now()}, outcomeRefused, codeInvalidRequest, rule)
		return r.writeServer(errorLine(e.id, codeInvalidRequest, "sandbox-run: "+err.Error(), nil))
	case e.method == "" && e.idKey != "":
		if c := r.takePending(e.idKey); c != nil {
			r.audit.call(c, outcomeWithheld, codeInternalError, rule)
			return r.writeClient(errorLine(c.clientID, codeInternalError,
				"sandbox-run: the server's response was withheld: "+err.Error(), nil))
		}
	}
	r.log.Warn("dropped a server message", "method", capString(e.method), "error", err.Error())
	r.audit.dropped(e.method, rule)
	return nil
}

// serverResponse delivers the server's answer under the client's id,
// filtered for the request it answers.
func (r *relay) serverResponse(e envelope, dropped *int) error {
	c := r.takePending(e.idKey)
	if c == nil {
		*dropped++
		r.log.Warn("dropped a response to no pending request", "id", capString(string(e.id)))
		return nil
	}
	if e.obj.has("result") && e.obj.has("error") {
		// A client library may read either member: deliver the error.
		code, msg := rpcErrorOf(e)
		r.audit.call(c, outcomeRPCError, code, "")
		return r.writeClient(errorLine(c.clientID, code,
			"sandbox-run: the server's response held both a result and an error; the result was withheld: "+msg, nil))
	}
	result, err := r.filterResult(c, e)
	if err != nil {
		r.log.Warn(c.method+" result withheld", "error", err.Error())
		r.audit.call(c, outcomeWithheld, codeInternalError, "")
		return r.writeClient(errorLine(c.clientID, codeInternalError,
			"sandbox-run: the server's "+c.method+" result was withheld: "+err.Error(), nil))
	}
	outcome, code := responseOutcome(e)
	r.audit.call(c, outcome, code, "")
	m := e.out()
	m.id = c.clientID
	if result != nil {
		m.result = result
	}
	return r.sendClient(m)
}

// takePending removes and returns the pending request the server knows
// by idKey (one of the relay's ids), or nil.
func (r *relay) takePending(idKey string) *call {
	id, ok := relayID(idKey)
	if !ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.pending[id]
	if c != nil {
		delete(r.pending, id)
		delete(r.byClient, c.clientKey)
	}
	return c
}

// relayID reads an id key as one of the relay's ids.
func relayID(idKey string) (uint64, bool) {
	digits, ok := strings.CutPrefix(idKey, "n:")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	return id, err == nil && id > 0
}

// rpcErrorOf reads a response's error member; an unreadable one is an
// internal error.
func rpcErrorOf(e envelope) (int, string) {
	var d struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(e.obj["error"], &d) != nil || d.Code == nil {
		return codeInternalError, "(an unreadable error)"
	}
	return *d.Code, capString(d.Message)
}

// responseOutcome classifies a response for the audit.
func responseOutcome(e envelope) (string, int) {
	if e.obj.has("error") {
		code, _ := rpcErrorOf(e)
		return outcomeRPCError, code
	}
	res, err := parseObject(e.obj["result"])
	if err != nil {
		return outcomeOK, 0
	}
	var isErr bool
	json.Unmarshal(res["isError"], &isErr)
	switch {
	case isErr:
		return outcomeToolError, 0
	case res.str("resultType") == resultInputRequired:
		return outcomeInputRequired, 0
	case res.has("task"):
		return outcomeTask, 0
	}
	return outcomeOK, 0
}

// failPending answers every request the server left unanswered.
func (r *relay) failPending() {
	r.mu.Lock()
	r.ended = true
	if r.endReason == "" {
		r.endReason = "its output ended"
	}
	reason := r.endReason
	calls := r.pending
	r.pending = map[uint64]*call{}
	r.byClient = map[string]uint64{}
	r.mu.Unlock()
	for _, c := range calls {
		r.audit.call(c, outcomeServerEnded, codeServerGone, "")
		r.writeClient(errorLine(c.clientID, codeServerGone, "sandbox-run: the MCP server ended before answering: "+reason, nil))
	}
}

var errTooLong = errors.New("message too long")

// readLine returns the next line, at most max bytes. A line over max is
// reported as errTooLong: with hs set, the rest of it is read and skipped,
// fed to hs on the way; with hs nil, reading stops where the limit was
// passed (the caller ends the session: the line may never end). At the end
// of input it returns the last, unterminated line (if any) with io.EOF.
// A line longer than br's buffer is assembled in *scratch, which is
// reused from line to line, so that a run of large messages does not
// leave one garbage buffer each.
func readLine(br *bufio.Reader, max int, hs *headScan, scratch *[]byte) ([]byte, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > max {
			if hs == nil {
				return nil, errTooLong
			}
			hs.feed(buf)
			hs.feed(frag)
			for errors.Is(err, bufio.ErrBufferFull) {
				frag, err = br.ReadSlice('\n')
				hs.feed(frag)
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return nil, err
			}
			return nil, errTooLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			if buf == nil {
				buf = (*scratch)[:0]
			}
			buf = append(buf, frag...)
			*scratch = buf
			continue
		}
		if buf == nil {
			return frag, err // valid until the next read: callers copy what they keep
		}
		buf = append(buf, frag...)
		*scratch = buf
		return buf, err
	}
}

func withNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\n' {
		return b
	}
	// b is often a trimmed slice of the line buffer: its cap may hold the '\n'.
	if len(b) < cap(b) && b[:len(b)+1][len(b)] == '\n' {
		return b[:len(b)+1]
	}
	return append(bytes.Clone(b), '\n')
}
