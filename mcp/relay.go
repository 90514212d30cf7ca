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
	"sync"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// DefaultMaxMessage is the largest JSON-RPC message, in bytes, the relay
// accepts from either side when Options.MaxMessage is zero.
const DefaultMaxMessage = 32 << 20

// Error codes the relay answers with itself. A refused tool is "invalid
// params", as MCP prescribes for an unknown tool.
const (
	codeRefused    = mcpgo.INVALID_PARAMS
	codeServerGone = mcpgo.INTERNAL_ERROR
)

// call is a client request the server has not answered yet.
type call struct {
	id       mcpgo.RequestId
	method   string
	tool     string // tools/call only
	start    time.Time
	argBytes int
	args     json.RawMessage // kept only when the audit records values
}

// relay passes JSON-RPC messages between one client and one server,
// filtering tools/list results and refusing calls to hidden tools. It holds
// at most one message per direction in memory (plus the arguments of
// pending calls when AuditArgs is set): a side that floods the other is
// slowed down by the pipe, never buffered.
type relay struct {
	rules      Rules
	audit      *auditor
	auditArgs  bool
	maxMessage int
	log        *slog.Logger

	clientMu  sync.Mutex // serialises writes to the client
	clientOut io.Writer

	mu         sync.Mutex
	pending    map[string]*call
	ended      bool // the server's output has ended
	clientGone atomic.Bool
	endReason  string // why, for the errors pending calls get
}

// streams are the four ends the relay joins.
type streams struct {
	clientIn  io.Reader
	clientOut io.Writer
	serverIn  io.WriteCloser
	serverOut io.Reader
}

// run relays until the server's output ends, then answers every pending
// client request with an error. When the client's input ends first, the
// server's input is closed (the MCP way of asking a stdio server to exit)
// and clientEOF, when set, is called; run still returns only once the
// server's output has ended. It returns errServerEnded when the server's
// output ended while the client was still connected.
func (r *relay) run(ctx context.Context, s streams, clientEOF func()) error {
	r.clientOut = s.clientOut
	if r.pending == nil {
		r.pending = map[string]*call{}
	}
	go func() {
		r.clientToServer(s.clientIn, s.serverIn)
		// Set before the server can see EOF, so before it can exit of it.
		r.clientGone.Store(true)
		s.serverIn.Close()
		if clientEOF != nil {
			clientEOF()
		}
	}()
	err := r.serverToClient(s.serverOut)
	if errors.Is(err, errServerEnded) && r.clientGone.Load() {
		// The client left first: a server that ends now does as asked.
		err = nil
	}
	r.failPending()
	return err
}

var errServerEnded = errors.New("server ended")

// setEndReason records why the server's output will end, before it does.
func (r *relay) setEndReason(s string) {
	r.mu.Lock()
	r.endReason = s
	r.mu.Unlock()
}

func (r *relay) writeClient(b []byte) error {
	r.clientMu.Lock()
	defer r.clientMu.Unlock()
	_, err := r.clientOut.Write(b)
	return err
}

// clientToServer forwards the client's messages until its input ends.
func (r *relay) clientToServer(in io.Reader, out io.Writer) {
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := readLine(br, r.maxMessage)
		if errors.Is(err, errTooLong) {
			r.log.Warn("client message over the size limit dropped", "limit", r.maxMessage)
			r.writeClient(errorLine(mcpgo.NewRequestId(nil), mcpgo.INVALID_REQUEST,
				fmt.Sprintf("sandbox-run: message over %d bytes dropped", r.maxMessage), nil))
			continue
		}
		if len(line) > 0 {
			if werr := r.fromClient(line, out); werr != nil {
				r.log.Debug("writing to the server", "error", werr)
			}
		}
		if err != nil {
			return
		}
	}
}

// fromClient handles one line from the client.
func (r *relay) fromClient(line []byte, out io.Writer) error {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return nil
	}
	if trimmed[0] == '[' {
		// A batch (MCP 2025-03-26) is split into its members, so that
		// every tools/call in it meets the rules.
		var batch []json.RawMessage
		if err := json.Unmarshal(trimmed, &batch); err != nil {
			return r.writeClient(errorLine(mcpgo.NewRequestId(nil), mcpgo.PARSE_ERROR, "sandbox-run: invalid JSON batch", nil))
		}
		for _, m := range batch {
			if err := r.fromClientMessage(m, out); err != nil {
				return err
			}
		}
		return nil
	}
	return r.fromClientMessage(trimmed, out)
}

func (r *relay) fromClientMessage(raw []byte, out io.Writer) error {
	e, err := parseEnvelope(raw)
	if err != nil {
		code := mcpgo.INVALID_REQUEST
		if !errors.Is(err, errAmbiguous) {
			var se *json.SyntaxError
			if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) {
				code = mcpgo.PARSE_ERROR
			}
		}
		return r.writeClient(errorLine(e.id, code, "sandbox-run: "+err.Error(), nil))
	}
	switch e.kind {
	case kindRequest:
		c := &call{id: e.id, method: e.method, start: time.Now()}
		if e.method == string(mcpgo.MethodToolsCall) {
			p, err := e.params()
			if err != nil {
				return r.writeClient(errorLine(e.id, mcpgo.INVALID_PARAMS, "sandbox-run: tools/call params: "+err.Error(), nil))
			}
			c.tool = p.str("name")
			args := p["arguments"]
			c.argBytes = len(args)
			if r.auditArgs {
				c.args = bytes.Clone(args)
			}
			if ok, rule := r.rules.Check(c.tool); !ok {
				r.audit.call(c, outcomeRefused, 0, rule)
				msg := fmt.Sprintf("sandbox-run: tool %q is not available: refused by %s", c.tool, rule)
				return r.writeClient(errorLine(e.id, codeRefused, msg, map[string]string{"tool": c.tool, "rule": rule}))
			}
		}
		r.mu.Lock()
		if r.ended {
			reason := r.endReason
			r.mu.Unlock()
			r.audit.call(c, outcomeServerEnded, 0, "")
			return r.writeClient(errorLine(e.id, codeServerGone, "sandbox-run: the MCP server has ended: "+reason, nil))
		}
		r.pending[e.idKey] = c
		r.mu.Unlock()
	case kindNotification:
		if e.method == string(mcpgo.MethodNotificationCancelled) {
			r.cancelled(e)
		}
	}
	return writeLine(out, raw)
}

// cancelled forgets a request the client gave up on: the server need not
// answer it, and an answer that still comes is dropped.
func (r *relay) cancelled(e envelope) {
	p, err := e.params()
	if err != nil {
		return
	}
	var id mcpgo.RequestId
	if json.Unmarshal(p["requestId"], &id) != nil {
		return
	}
	r.mu.Lock()
	c := r.pending[id.String()]
	delete(r.pending, id.String())
	r.mu.Unlock()
	if c != nil && c.tool != "" {
		r.audit.call(c, outcomeCancelled, 0, "")
	}
}

// serverToClient forwards the server's messages until its output ends.
func (r *relay) serverToClient(in io.Reader) error {
	br := bufio.NewReaderSize(in, 64<<10)
	dropped := 0
	for {
		line, err := readLine(br, r.maxMessage)
		if errors.Is(err, errTooLong) {
			// Its id is unknown, so a call waiting for it would wait
			// forever: end the session instead.
			r.setEndReason(fmt.Sprintf("it sent a message over %d bytes", r.maxMessage))
			return fmt.Errorf("mcp: the server sent a message over %d bytes: %w", r.maxMessage, errServerEnded)
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
		// Not a message a client could act on safely (stray output, or
		// ambiguous JSON): dropped, and said so on the relay's log.
		*dropped++
		if *dropped <= 10 || *dropped%1000 == 0 {
			r.log.Warn("dropped a line from the server that is not a valid JSON-RPC message",
				"error", err.Error(), "dropped_total", *dropped)
		}
		return nil
	}
	if e.kind != kindResponse {
		return r.writeClient(withNewline(trimmed))
	}
	r.mu.Lock()
	c := r.pending[e.idKey]
	delete(r.pending, e.idKey)
	r.mu.Unlock()
	if c == nil {
		*dropped++
		r.log.Warn("dropped a response to no pending request", "id", e.idKey)
		return nil
	}
	switch c.method {
	case string(mcpgo.MethodToolsList):
		if filtered, changed, err := r.filterToolsList(e); err != nil {
			r.log.Warn("tools/list result withheld", "error", err.Error())
			return r.writeClient(errorLine(c.id, mcpgo.INTERNAL_ERROR, "sandbox-run: the server's tools/list result was withheld: "+err.Error(), nil))
		} else if changed {
			return r.writeClient(filtered)
		}
	case string(mcpgo.MethodToolsCall):
		outcome, code := callOutcome(e)
		r.audit.call(c, outcome, code, "")
	}
	return r.writeClient(withNewline(trimmed))
}

// filterToolsList drops hidden tools from a tools/list response. It returns
// the new line and whether anything changed; every other member stays as
// the server sent it.
func (r *relay) filterToolsList(e envelope) ([]byte, bool, error) {
	raw, ok := e.obj["result"]
	if !ok {
		return nil, false, nil // an error response
	}
	res, err := parseObject(raw)
	if err != nil {
		return nil, false, err
	}
	var tools []json.RawMessage
	if t, ok := res["tools"]; ok && string(t) != "null" {
		if err := json.Unmarshal(t, &tools); err != nil {
			return nil, false, fmt.Errorf("tools is not a list: %w", err)
		}
	}
	kept := make([]json.RawMessage, 0, len(tools))
	for _, t := range tools {
		obj, err := parseObject(t)
		if err != nil {
			r.log.Warn("tools/list entry dropped", "error", err.Error())
			continue
		}
		if ok, _ := r.rules.Check(obj.str("name")); ok && obj.str("name") != "" {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(tools) {
		return nil, false, nil
	}
	res["tools"], _ = json.Marshal(kept)
	e.obj["result"], err = json.Marshal(res)
	if err != nil {
		return nil, false, err
	}
	b, err := json.Marshal(e.obj)
	if err != nil {
		return nil, false, err
	}
	return append(b, '\n'), true, nil
}

// callOutcome classifies a tools/call response for the audit.
func callOutcome(e envelope) (string, int) {
	if raw, ok := e.obj["error"]; ok {
		var d mcpgo.JSONRPCErrorDetails
		json.Unmarshal(raw, &d)
		return outcomeRPCError, d.Code
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
	case res.str("resultType") == string(mcpgo.ResultTypeInputRequired):
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
	reason := r.endReason
	if reason == "" {
		reason = "its output ended"
	}
	r.endReason = reason
	calls := r.pending
	r.pending = map[string]*call{}
	r.mu.Unlock()
	for _, c := range calls {
		if c.tool != "" {
			r.audit.call(c, outcomeServerEnded, 0, "")
		}
		r.writeClient(errorLine(c.id, codeServerGone, "sandbox-run: the MCP server ended before answering: "+reason, nil))
	}
}

var errTooLong = errors.New("message too long")

// readLine returns the next line, at most max bytes. A line over max is
// skipped whole and reported as errTooLong. At the end of input it returns
// the last, unterminated line (if any) with io.EOF.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > max {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return nil, err
			}
			return nil, errTooLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			buf = append(buf, frag...)
			continue
		}
		if buf == nil {
			return frag, err // valid until the next read: callers copy what they keep
		}
		return append(buf, frag...), err
	}
}

func withNewline(b []byte) []byte {
	// b is a trimmed slice of the line buffer: its cap may hold the '\n'.
	if len(b) < cap(b) && b[:len(b)+1][len(b)] == '\n' {
		return b[:len(b)+1]
	}
	return append(bytes.Clone(b), '\n')
}

func writeLine(w io.Writer, b []byte) error {
	_, err := w.Write(withNewline(b))
	return err
}
