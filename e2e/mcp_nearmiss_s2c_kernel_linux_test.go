package e2e

// What is judged is what is forwarded, from the server to the client
// (issue 34 item 1), through the binary, against a real client: mcp-go
// v1.2.1's, which reads member names as encoding/json does, regardless of
// case and with the last of two spellings winning. The hostile server's
// nearmiss tool sends it the near misses. Control: through `sandbox-run
// run`, which relays nothing, the client acts on each of them.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// sampler is a client's sampling handler that counts what it was asked.
type sampler struct{ asked atomic.Int32 }

func (s *sampler) CreateMessage(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	s.asked.Add(1)
	return &mcp.CreateMessageResult{Model: "e2e",
		SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("sampled")}}, nil
}

// serverNearMisses are the hostile server's nearmiss variants that send a
// sampling/createMessage request (the member named spelt so; "ping
// Method" after "method":"ping"), with what the audited refusal's rule
// says.
var serverNearMisses = []struct{ variant, rule string }{
	{"Method", `member "Method" differs from "method"`},
	{"ping Method", "a key repeated or differing only in case"},
	{"ID", `member "ID" differs from "id"`},
}

// listNearMisses are the nearmiss variants after which tools/list lists
// write_file under "Tools" (alone, or after "tools").
var listNearMisses = []string{"Tools", "tools Tools"}

// nearMissTool calls the hostile server's nearmiss tool and returns what
// the server says became of its message.
func nearMissTool(t *testing.T, s *mcpSession, variant string) string {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = "nearmiss"
	req.Params.Arguments = map[string]any{"variant": variant}
	r, err := s.c.CallTool(s.ctx, req)
	if err != nil {
		t.Fatalf("nearmiss %s: %v; sandbox-run stderr:\n%s", variant, err, s.stderr)
	}
	return resultText(r)
}

// listedTools lists the tools, or returns the error.
func listedTools(s *mcpSession) ([]string, error) {
	res, err := s.c.ListTools(s.ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names, nil
}

func TestMCPServerNearMiss(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	srv := goServer(t)
	tail := []string{"--workdir", w, "--read", filepath.Dir(srv), "--", srv, mcptest.HostileArg}

	// Control: straight, the client answers each request and lists the
	// tool only "Tools" names.
	var ctlSampler sampler
	ctl := startMCP(t, append([]string{"run"}, tail...), client.WithSamplingHandler(&ctlSampler))
	for i, v := range serverNearMisses {
		if got := nearMissTool(t, ctl, v.variant); got != "answered" {
			t.Errorf("control: %s: the server says %q, want answered (untested)", v.variant, got)
		}
		if n := ctlSampler.asked.Load(); n != int32(i+1) {
			t.Errorf("control: %s: the client was asked %d times, want %d (untested)", v.variant, n, i+1)
		}
	}
	for _, v := range listNearMisses {
		nearMissTool(t, ctl, v)
		if names, err := listedTools(ctl); err != nil || !slices.Contains(names, "write_file") {
			t.Errorf("control: %s: the client lists %v (%v), want write_file (untested)", v, names, err)
		}
	}
	ctl.close()

	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	var relaySampler sampler
	m := startMCP(t, append(append([]string{"mcp"}, serverNearMissFlags(audit)...), tail...), client.WithSamplingHandler(&relaySampler))
	relayServerNearMisses(t, m, &relaySampler)
	m.close()
	checkServerNearMissAudit(t, audit)
}

// TestMCPHTTPServerNearMiss: the same near misses over Streamable HTTP
// (`mcp --listen`), to mcp-go v1.2.1's Streamable HTTP client. There is
// no straight HTTP control (the hostile server speaks stdio only): this
// client reads the list result and the "ID" and "ping Method" requests
// with encoding/json as its stdio transport does (TestMCPServerNearMiss's
// control), but takes a message for a request only when it has an exact
// "method" key, so "Method" alone is no request to it. Control here: an
// exact sampling request reaches the client's handler through this relay.
func TestMCPHTTPServerNearMiss(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	srv := goServer(t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	// Sampling is not denied here: the control below shows an exact
	// request reaches the client's handler over this transport.
	h := startHTTPServer(t, 4*mcpTimeout, w, []string{srv, mcptest.HostileArg},
		"--read", filepath.Dir(srv), "--deny-tool", "write_file", "--audit", audit)
	var s sampler
	tr, err := transport.NewStreamableHTTP(h.url,
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + h.token}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*mcpTimeout)
	defer cancel()
	m := &mcpSession{c: client.NewClient(tr, client.WithSamplingHandler(&s)), ctx: ctx, stderr: h.stderr}
	if err := m.c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "sandbox-run-e2e", Version: "1"}
	if _, err := m.c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize: %v; sandbox-run stderr:\n%s", err, h.stderr)
	}
	relayServerNearMisses(t, m, &s)
	req2 := mcp.CallToolRequest{}
	req2.Params.Name = "sample"
	r, err := m.c.CallTool(ctx, req2)
	if err != nil || !strings.Contains(resultText(r), "sampling/createMessage: answered") || s.asked.Load() != 1 {
		t.Errorf("control: an exact sampling/createMessage through the relay: %v %v, asked %d", r, err, s.asked.Load())
	}
	m.close()
	checkServerNearMissAudit(t, audit)
}

// serverNearMissFlags are the relay's flags: the requests and the tool
// the near misses would smuggle past are denied.
func serverNearMissFlags(audit string) []string {
	return []string{"--deny-server-request", "sampling/createMessage", "--deny-tool", "write_file", "--audit", audit}
}

// relayServerNearMisses sends the near misses through the relay m and
// wants none to reach the client.
func relayServerNearMisses(t *testing.T, m *mcpSession, s *sampler) {
	t.Helper()
	for _, v := range serverNearMisses {
		if got := nearMissTool(t, m, v.variant); got == "answered" {
			t.Errorf("%s: the client answered the near miss through the relay", v.variant)
		}
	}
	// The relay forwards in order: a request forwarded before the tool's
	// result would have reached the handler by now or never.
	if n := s.asked.Load(); n != 0 {
		t.Errorf("the client was asked to sample %d times through the relay, want 0", n)
	}
	for _, v := range listNearMisses {
		nearMissTool(t, m, v)
		if names, err := listedTools(m); err == nil && slices.Contains(names, "write_file") {
			t.Errorf("%s: the client lists the denied write_file through the relay: %v", v, names)
		}
	}
	// Control: an exact call passes the same relay.
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"text": "hi"}
	if r, err := m.c.CallTool(m.ctx, req); err != nil || resultText(r) != "hi" {
		t.Errorf("control: echo through the relay: %v %v", r, err)
	}
}

// checkServerNearMissAudit wants a refusal for each of serverNearMisses
// and a tools/list result withheld for each of listNearMisses.
func checkServerNearMissAudit(t *testing.T, audit string) {
	t.Helper()
	recs := auditLines(t, audit)
	for _, v := range serverNearMisses {
		found := false
		for _, rec := range recs {
			ev, rule := rec["event"], fmt.Sprint(rec["rule"])
			if (ev == "mcp_server_request" || ev == "mcp_dropped") && rec["outcome"] == "refused" &&
				strings.HasPrefix(rule, "malformed:") && strings.Contains(rule, v.rule) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no refusal audited with %q: %v", v.variant, v.rule, recs)
		}
	}
	withheld := 0
	for _, rec := range recs {
		if rec["method"] == "tools/list" && rec["outcome"] == "withheld" {
			withheld++
		}
	}
	if withheld != len(listNearMisses) {
		t.Errorf("%d tools/list results withheld, want %d: %v", withheld, len(listNearMisses), recs)
	}
}
