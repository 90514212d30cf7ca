package mcp

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Outcomes of a tools/call, as the audit records them.
const (
	outcomeOK            = "ok"             // a result
	outcomeToolError     = "tool_error"     // a result with isError: true
	outcomeInputRequired = "input_required" // the server asked the client for input first (2026-07-28)
	outcomeTask          = "task"           // the server started a task; its result comes through tasks/result
	outcomeRPCError      = "rpc_error"      // a JSON-RPC error from the server
	outcomeRefused       = "refused"        // hidden by the rules; the server never saw it
	outcomeCancelled     = "cancelled"      // the client cancelled it
	outcomeServerEnded   = "server_ended"   // the server ended before answering
)

// Record is one line of the audit log (JSON). Event is "mcp_start",
// "mcp_call" or "mcp_end"; the names keep clear of the run's own events
// (run_start, egress, run_end) when both share one file. A call record is
// written when the call ends, whichever way; its Time is when it began.
type Record struct {
	Time  time.Time `json:"time"`
	RunID string    `json:"run_id"`
	Event string    `json:"event"`

	// mcp_call
	Tool       string          `json:"tool,omitempty"`
	ArgBytes   *int            `json:"arg_bytes,omitempty"`
	DurationMS *float64        `json:"duration_ms,omitempty"`
	Outcome    string          `json:"outcome,omitempty"`
	ErrorCode  int             `json:"error_code,omitempty"`
	Rule       string          `json:"rule,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`

	// mcp_start
	Server string   `json:"server,omitempty"` // the server's program (argv[0]); its arguments may hold secrets
	Name   string   `json:"name,omitempty"`   // the caller's label for the server (Options.Name)
	Allow  []string `json:"allow_tools,omitempty"`
	Deny   []string `json:"deny_tools,omitempty"`

	// mcp_end
	ExitCode *int   `json:"exit_code,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// SandboxRunID is the run id of the server's sandbox, which names its
	// own records (run_start, egress, run_end) when they share the file.
	SandboxRunID string `json:"sandbox_run_id,omitempty"`
}

// auditor writes Records as JSON lines, one Write each. A nil auditor
// writes nothing.
type auditor struct {
	mu    sync.Mutex
	w     io.Writer
	runID string
	now   func() time.Time
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
	a.mu.Lock()
	a.w.Write(append(b, '\n'))
	a.mu.Unlock()
}

func (a *auditor) call(c *call, outcome string, code int, rule string) {
	if a == nil || c.method != string(mcpgo.MethodToolsCall) {
		return
	}
	now := a.now()
	ms := float64(now.Sub(c.start).Microseconds()) / 1000
	n := c.argBytes
	a.write(Record{Time: c.start.UTC(), Event: "mcp_call", Tool: c.tool, ArgBytes: &n, DurationMS: &ms,
		Outcome: outcome, ErrorCode: code, Rule: rule, Args: c.args})
}
