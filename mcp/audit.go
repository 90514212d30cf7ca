package mcp

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"
)

// Outcomes of a request, as the audit records them.
const (
	outcomeOK            = "ok"             // a result
	outcomeToolError     = "tool_error"     // a result with isError: true
	outcomeInputRequired = "input_required" // the server asked the client for input first (2026-07-28)
	outcomeTask          = "task"           // the server started a task; its result comes through tasks/result
	outcomeRPCError      = "rpc_error"      // a JSON-RPC error from the answering side
	outcomeRefused       = "refused"        // refused by the relay; the other side never saw it
	outcomeCancelled     = "cancelled"      // the client cancelled it
	outcomeServerEnded   = "server_ended"   // the server ended before answering
	outcomeTooLarge      = "too_large"      // over --max-message; dropped unread
	outcomeWithheld      = "withheld"       // the server's result could not be filtered, so it was withheld
)

// Defaults of the audit's caps.
const (
	// DefaultAuditArgsMax is the most argument bytes kept per call with
	// AuditArgs; larger arguments are recorded by size only.
	DefaultAuditArgsMax = 4 << 10
	// DefaultAuditLineMax is the longest audit line; a record that would
	// be longer loses its argument values.
	DefaultAuditLineMax = 16 << 10
	// MinAuditLineMax is the smallest line cap: a record's strings are
	// cut to 512 bytes each, so every record but its argument values fits.
	MinAuditLineMax = 4 << 10
	// maxAuditString bounds a name, URI or rule in a record.
	maxAuditString = 512
)

// Record is one line of the audit log (JSON). Event is one of
//
//	mcp_start           the session began (the rules in force)
//	mcp_call_start      a tools/call is about to reach the server
//	mcp_call            a tools/call ended, whichever way
//	mcp_request         any other client request ended, whichever way
//	mcp_server_request  a request from the server to the client ended
//	mcp_dropped         a message from the server was refused, and none could be told
//	mcp_end             the session ended (why)
//	mcp_session_evicted ServeHTTP ended an idle session at --max-sessions
//	                    to begin a new one (Client, Reason)
//
// The names keep clear of the run's own events (run_start, egress,
// run_end) when both share one file. A request's record is written when
// it ends; its Time is when it began. A tools/call the relay forwards also
// has an mcp_call_start, written (one write to the audit's writer, which
// for --audit is the file itself, unbuffered) before the server is sent
// the call: a relay killed while the server runs the call leaves that
// record. Both carry the same CallID.
type Record struct {
	Time  time.Time `json:"time"`
	RunID string    `json:"run_id"`
	Event string    `json:"event"`

	// mcp_call, mcp_request, mcp_server_request
	Method string `json:"method,omitempty"`
	// CallID is the id the server saw for a forwarded request; it pairs
	// an mcp_call_start with its mcp_call.
	CallID uint64 `json:"call_id,omitempty"`
	Tool   string `json:"tool,omitempty"`
	Prompt string `json:"prompt,omitempty"`
	URI    string `json:"uri,omitempty"`
	// URISent is a resource URI as the client sent it, when URI (the
	// canonical form the relay judged and forwarded) differs.
	URISent string `json:"uri_sent,omitempty"`
	// NameSent is the JSON a request sent where a name or URI string
	// belongs, when it was not one (cut to 512 bytes).
	NameSent     string          `json:"name_sent,omitempty"`
	ParamBytes   *int            `json:"param_bytes,omitempty"`
	ArgBytes     *int            `json:"arg_bytes,omitempty"`
	DurationMS   *float64        `json:"duration_ms,omitempty"`
	Outcome      string          `json:"outcome,omitempty"`
	ErrorCode    int             `json:"error_code,omitempty"`
	Rule         string          `json:"rule,omitempty"`
	Args         json.RawMessage `json:"args,omitempty"`
	ArgsOmitted  string          `json:"args_omitted,omitempty"`
	ArgsRedacted int             `json:"args_redacted,omitempty"`

	// mcp_start
	Server         string   `json:"server,omitempty"` // the server's program (argv[0]); its arguments may hold secrets
	Name           string   `json:"name,omitempty"`   // the caller's label for the server (Options.Name)
	Client         string   `json:"client,omitempty"` // "http ADDR" for a session of ServeHTTP
	Allow          []string `json:"allow_tools,omitempty"`
	Deny           []string `json:"deny_tools,omitempty"`
	AllowPrompts   []string `json:"allow_prompts,omitempty"`
	DenyPrompts    []string `json:"deny_prompts,omitempty"`
	AllowResources []string `json:"allow_resources,omitempty"`
	DenyResources  []string `json:"deny_resources,omitempty"`
	DenyFromServer []string `json:"deny_server_requests,omitempty"`

	// mcp_end
	ExitCode *int   `json:"exit_code,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// SandboxRunID is the run id of the server's sandbox, which names its
	// own records (run_start, egress, run_end) when they share the file.
	SandboxRunID string `json:"sandbox_run_id,omitempty"`
}

// auditor writes Records as JSON lines, one Write each, none longer than
// maxLine. A nil auditor writes nothing.
type auditor struct {
	mu      sync.Mutex
	w       io.Writer
	runID   string
	now     func() time.Time
	maxLine int
}

func (a *auditor) write(rec Record) {
	if a == nil || a.w == nil {
		return
	}
	rec.RunID = a.runID
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	max := a.maxLine
	if max <= 0 {
		max = DefaultAuditLineMax
	}
	if len(b)+1 > max && rec.Args != nil {
		rec.Args, rec.ArgsRedacted = nil, 0
		rec.ArgsOmitted = fmt.Sprintf("the audit line would be over %d bytes (--audit-line-max)", max)
		if b, err = json.Marshal(rec); err != nil {
			return
		}
	}
	if len(b)+1 > max {
		// Every string is cut already: only the rule lists of mcp_start
		// can be this long. Keep the record, say it was cut.
		b, _ = json.Marshal(Record{Time: rec.Time, RunID: rec.RunID, Event: rec.Event, Method: rec.Method,
			Outcome: rec.Outcome, Reason: fmt.Sprintf("record over %d bytes (--audit-line-max); details left out", max)})
	}
	a.mu.Lock()
	a.w.Write(append(b, '\n'))
	a.mu.Unlock()
}

func (a *auditor) duration(start time.Time) *float64 {
	ms := float64(a.now().Sub(start).Microseconds()) / 1000
	return &ms
}

// call records how a client request ended.
func (a *auditor) call(c *call, outcome string, code int, rule string) {
	if a == nil {
		return
	}
	rec := Record{Time: c.start.UTC(), Event: "mcp_request", Method: capString(c.method), DurationMS: a.duration(c.start),
		Outcome: outcome, ErrorCode: code, Rule: capString(rule), NameSent: c.nameSent, CallID: c.relayID}
	pb := c.paramBytes
	rec.ParamBytes = &pb
	switch c.kind {
	case KindTool:
		rec.Tool = capString(c.name)
	case KindPrompt:
		rec.Prompt = capString(c.name)
	case KindResource:
		rec.URI, rec.URISent = capString(auditURI(c.name)), capString(auditURI(c.uriSent))
	}
	if c.method == methodToolsCall {
		rec.Event = "mcp_call"
		n := c.argBytes
		rec.ArgBytes = &n
		rec.Args, rec.ArgsOmitted, rec.ArgsRedacted = c.args, c.argsNote, c.redacted
	}
	a.write(rec)
}

// callStart records a tools/call about to be forwarded: what is called,
// with the arguments as mcp_call will record them. It returns once the
// record was handed to the writer in one Write.
func (a *auditor) callStart(c *call) {
	if a == nil || c.method != methodToolsCall {
		return
	}
	pb, ab := c.paramBytes, c.argBytes
	a.write(Record{Time: c.start.UTC(), Event: "mcp_call_start", Method: c.method, CallID: c.relayID,
		Tool: capString(c.name), ParamBytes: &pb, ArgBytes: &ab, Args: c.args, ArgsOmitted: c.argsNote, ArgsRedacted: c.redacted})
}

// serverRequest records how a request from the server ended.
func (a *auditor) serverRequest(sc *srvCall, outcome string, code int, rule string) {
	if a == nil {
		return
	}
	a.write(Record{Time: sc.start.UTC(), Event: "mcp_server_request", Method: capString(sc.method),
		DurationMS: a.duration(sc.start), Outcome: outcome, ErrorCode: code, Rule: capString(rule)})
}

// dropped records a message from the server refused with no request to
// answer or fail: its method, when it named one exactly, and why.
func (a *auditor) dropped(method, rule string) {
	if a == nil {
		return
	}
	a.write(Record{Time: a.now().UTC(), Event: "mcp_dropped", Method: capString(method), Outcome: outcomeRefused,
		Rule: capString(rule)})
}

// capString cuts s to maxAuditString bytes, at a character boundary, and
// says so.
func capString(s string) string {
	if len(s) <= maxAuditString {
		return s
	}
	cut := maxAuditString
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:cut], len(s))
}
