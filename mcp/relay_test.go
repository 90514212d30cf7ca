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
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
)

// syncBuffer is a bytes.Buffer safe for the relay's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records are the audit's records but mcp_call_start (see allRecords).
func (s *syncBuffer) records(t *testing.T) []Record {
	t.Helper()
	var out []Record
	for _, r := range s.allRecords(t) {
		if r.Event != "mcp_call_start" {
			out = append(out, r)
		}
	}
	return out
}

func (s *syncBuffer) allRecords(t *testing.T) []Record {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var r Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

// pipes are the relay's four ends as io.Pipes, with the test's ends.
type pipes struct {
	streams
	toRelay   *io.PipeWriter // the client writes here
	fromRelay *io.PipeReader // the client reads here
	toServer  *io.PipeReader // the server reads here
	fromSrv   *io.PipeWriter // the server writes here
}

func newPipes() *pipes {
	cr, cw := io.Pipe()
	or, ow := io.Pipe()
	sr, sw := io.Pipe()
	vr, vw := io.Pipe()
	return &pipes{
		streams: streams{clientIn: cr, clientOut: ow, serverIn: sw, serverOut: vr},
		toRelay: cw, fromRelay: or, toServer: sr, fromSrv: vw,
	}
}

// startRelay runs a relay on p and returns its audit and its result.
func startRelay(t *testing.T, p *pipes, rules Rules) (*syncBuffer, <-chan error) {
	t.Helper()
	return startRelayOpts(t, p, Options{Rules: rules, MaxMessage: 1 << 20})
}

// startRelayOpts runs a relay built from opts (as Serve builds it) on p.
func startRelayOpts(t *testing.T, p *pipes, opts Options) (*syncBuffer, <-chan error) {
	t.Helper()
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	audit := &syncBuffer{}
	var w io.Writer = audit
	if opts.Audit != nil {
		w = opts.Audit
	}
	r := newRelay(opts, &auditor{w: w, runID: "test", now: time.Now, maxLine: opts.AuditLineMax}, slog.New(slog.DiscardHandler))
	errc := make(chan error, 1)
	go func() {
		err := r.run(context.Background(), p.streams, nil)
		p.streams.clientOut.(*io.PipeWriter).Close()
		errc <- err
	}()
	return audit, errc
}

// goServer serves mcptest.NewServer on p's server ends until they close.
func goServer(t *testing.T, p *pipes) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		server.NewStdioServer(mcptest.NewServer()).Listen(ctx, p.toServer, p.fromSrv)
		p.fromSrv.Close()
	}()
	t.Cleanup(func() {
		cancel()
		p.toServer.Close()
		<-done
	})
}

func newClient(t *testing.T, p *pipes, opts ...client.ClientOption) *client.Client {
	t.Helper()
	tr := transport.NewIO(p.fromRelay, p.toRelay, io.NopCloser(strings.NewReader("")))
	c := client.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := mcpgo.InitializeRequest{}
	req.Params.ClientInfo = mcpgo.Implementation{Name: "relay-test", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize through the relay: %v", err)
	}
	return c
}

func callTool(ctx context.Context, c *client.Client, name string, args map[string]any) (*mcpgo.CallToolResult, error) {
	req := mcpgo.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return c.CallTool(ctx, req)
}

func text(r *mcpgo.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcpgo.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestRelayMCPGo drives the mcptest server through the relay with mcp-go's
// client, in both protocol styles: every feature passes, hidden tools are
// neither listed nor callable, and every call is audited.
func TestRelayMCPGo(t *testing.T) {
	for _, style := range []struct {
		name   string
		opts   []client.ClientOption
		modern bool
	}{
		{"stateless", nil, true},
		{"initialize", []client.ClientOption{client.WithProtocolVersion(mcpgo.ProtocolVersion20251125)}, false},
	} {
		t.Run(style.name, func(t *testing.T) {
			p := newPipes()
			goServer(t, p)
			audit, errc := startRelay(t, p, Rules{Allow: []string{"*"}, Deny: []string{"write_*", "crash"},
				AllowPrompts: []string{"*"}, AllowResources: []string{"mcptest://*"}})
			c := newClient(t, p, style.opts...)
			if got := mcpgo.IsModernProtocol(c.ProtocolVersion()); got != style.modern {
				t.Fatalf("protocol %q: modern %v, want %v", c.ProtocolVersion(), got, style.modern)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			tools, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			got := strings.Join(names, ",")
			for _, want := range []string{"echo", "read_file", "progress"} {
				if !strings.Contains(got, want) {
					t.Errorf("tools/list lacks %s: %s", want, got)
				}
			}
			for _, hidden := range []string{"write_file", "crash"} {
				if strings.Contains(got, hidden) {
					t.Errorf("tools/list shows hidden %s: %s", hidden, got)
				}
			}

			res, err := callTool(ctx, c, "echo", map[string]any{"text": "hi"})
			if err != nil || text(res) != "hi" {
				t.Fatalf("echo: %v %+v", err, res)
			}
			_, err = callTool(ctx, c, "write_file", map[string]any{"path": "/tmp/should-not-exist", "content": "x"})
			if err == nil || !strings.Contains(err.Error(), `--deny-tool "write_*"`) {
				t.Fatalf("hidden tool call: err %v, want a refusal naming the rule", err)
			}
			if !errors.Is(err, mcpgo.ErrInvalidParams) {
				t.Errorf("refusal %v is not invalid params", err)
			}

			rr, err := c.ReadResource(ctx, mcpgo.ReadResourceRequest{Params: mcpgo.ReadResourceParams{URI: mcptest.ResourceURI}})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].(mcpgo.TextResourceContents).Text != mcptest.ResourceText {
				t.Fatalf("resources/read: %v %+v", err, rr)
			}
			pr, err := c.GetPrompt(ctx, mcpgo.GetPromptRequest{Params: mcpgo.GetPromptParams{Name: mcptest.PromptName, Arguments: map[string]string{"name": "Ada"}}})
			if err != nil || len(pr.Messages) != 1 || !strings.Contains(pr.Messages[0].Content.(mcpgo.TextContent).Text, "Ada") {
				t.Fatalf("prompts/get: %v %+v", err, pr)
			}

			var mu sync.Mutex
			var progress []float64
			c.OnNotification(func(n mcpgo.JSONRPCNotification) {
				if n.Method == string(mcpgo.MethodNotificationProgress) {
					mu.Lock()
					progress = append(progress, n.Params.AdditionalFields["progress"].(float64))
					mu.Unlock()
				}
			})
			req := mcpgo.CallToolRequest{}
			req.Params.Name = "progress"
			req.Params.Arguments = map[string]any{"steps": 3, "delay_ms": 1}
			req.Params.Meta = &mcpgo.Meta{ProgressToken: "tok-1"}
			if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
				t.Fatalf("progress: %v %+v", err, res)
			}
			// mcp-go's server queues notifications apart from responses, so
			// the last may come just after the result.
			waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(progress) >= 3 })
			mu.Lock()
			if fmt.Sprint(progress) != "[1 2 3]" {
				t.Errorf("progress notifications %v, want [1 2 3]", progress)
			}
			mu.Unlock()

			c.Close()
			p.toRelay.Close()
			if err := <-errc; err != nil {
				t.Fatalf("relay after the client closed: %v", err)
			}
			var outcomes, others []string
			for _, r := range audit.records(t) {
				if r.RunID != "test" || r.DurationMS == nil || r.ParamBytes == nil {
					t.Errorf("bad record %+v", r)
				}
				if r.Event != "mcp_call" {
					others = append(others, r.Method+":"+r.Prompt+r.URI+":"+r.Outcome)
					continue
				}
				if r.ArgBytes == nil {
					t.Errorf("bad record %+v", r)
				}
				outcomes = append(outcomes, r.Tool+":"+r.Outcome)
			}
			if want := "echo:ok write_file:refused progress:ok"; strings.Join(outcomes, " ") != want {
				t.Errorf("audit %v, want %s", outcomes, want)
			}
			// Every other request the relay passed is audited too.
			gotOthers := strings.Join(others, " ")
			for _, want := range []string{"tools/list::ok", "resources/read:" + mcptest.ResourceURI + ":ok", "prompts/get:" + mcptest.PromptName + ":ok"} {
				if !strings.Contains(gotOthers, want) {
					t.Errorf("audit %s lacks %s", gotOthers, want)
				}
			}
		})
	}
}

// TestRelayServerEnds: a server that ends mid-call leaves no call waiting.
func TestRelayServerEnds(t *testing.T) {
	p := newPipes()
	// The server reads through a tap that says when the call has reached
	// it: its output then ends mid-call, not before the call was sent.
	called := make(chan struct{})
	relayed := p.toServer
	tapR, tapW := io.Pipe()
	p.toServer = tapR
	go func() {
		sc := bufio.NewScanner(relayed)
		sc.Buffer(nil, 1<<20)
		seen := false
		for sc.Scan() {
			if _, err := tapW.Write(append(sc.Bytes(), '\n')); err != nil {
				break
			}
			if !seen && strings.Contains(sc.Text(), `"tools/call"`) {
				seen = true
				close(called)
			}
		}
		tapW.Close()
		relayed.Close()
	}()
	goServer(t, p)
	audit, errc := startRelay(t, p, Rules{})
	c := newClient(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	callErr := make(chan error, 1)
	go func() {
		_, err := callTool(ctx, c, "progress", map[string]any{"steps": 1, "delay_ms": 60000})
		callErr <- err
	}()
	select {
	case <-called:
	case <-ctx.Done():
		t.Fatal("the call never reached the server")
	}
	p.fromSrv.Close() // the server's output ends: it died
	select {
	case err := <-callErr:
		if err == nil || !strings.Contains(err.Error(), "ended before answering") {
			t.Fatalf("pending call: %v, want an error saying the server ended", err)
		}
	case <-ctx.Done():
		t.Fatal("pending call never answered")
	}
	if err := <-errc; !errors.Is(err, errServerEnded) {
		t.Fatalf("relay: %v, want errServerEnded", err)
	}
	var calls []Record
	for _, r := range audit.records(t) {
		if r.Event == "mcp_call" {
			calls = append(calls, r)
		}
	}
	if len(calls) != 1 || calls[0].Tool != "progress" || calls[0].Outcome != outcomeServerEnded {
		t.Fatalf("audit %+v", calls)
	}
	// A request after the end is answered at once.
	if _, err := callTool(ctx, c, "echo", map[string]any{"text": "x"}); err == nil {
		t.Fatal("call after the server ended succeeded")
	}
}

// rawSession is a relay between a test acting as client and a test acting
// as server, line by line.
type rawSession struct {
	t       *testing.T
	p       *pipes
	fromCli *bufio.Reader // what the relay sends the client
	toSrv   *bufio.Reader // what the relay sends the server
	audit   *syncBuffer
	errc    <-chan error
	lastSrv string // the last line the server read
}

func newRaw(t *testing.T, rules Rules) *rawSession {
	return newRawOpts(t, Options{Rules: rules, MaxMessage: 1 << 20})
}

func newRawOpts(t *testing.T, opts Options) *rawSession {
	p := newPipes()
	audit, errc := startRelayOpts(t, p, opts)
	s := &rawSession{t: t, p: p, fromCli: bufio.NewReader(p.fromRelay), toSrv: bufio.NewReader(p.toServer), audit: audit, errc: errc}
	t.Cleanup(func() { p.toRelay.Close(); p.fromSrv.Close(); p.toServer.Close(); p.fromRelay.Close() })
	return s
}

func (s *rawSession) client(line string) { s.write(s.p.toRelay, line) }
func (s *rawSession) server(line string) { s.write(s.p.fromSrv, line) }

func (s *rawSession) write(w io.Writer, line string) {
	s.t.Helper()
	if _, err := io.WriteString(w, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

func readWithin(t *testing.T, r *bufio.Reader, what string) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		l, _ := r.ReadString('\n')
		ch <- l
	}()
	select {
	case l := <-ch:
		return strings.TrimSuffix(l, "\n")
	case <-time.After(5 * time.Second):
		t.Fatalf("nothing reached the %s", what)
		return ""
	}
}

func (s *rawSession) atServer() string {
	s.t.Helper()
	s.lastSrv = readWithin(s.t, s.toSrv, "server")
	return s.lastSrv
}
func (s *rawSession) atClient() string { s.t.Helper(); return readWithin(s.t, s.fromCli, "client") }

func TestRelayRaw(t *testing.T) {
	t.Run("writes every message in its own canonical form, with its own ids", func(t *testing.T) {
		s := newRaw(t, Rules{Deny: []string{"x"}})
		// Requests reach the server under the relay's ids, 1, 2, ...
		for _, l := range []struct{ sent, want string }{
			{`{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"file:///x","_meta":{"k":[1,2]}}}`,
				`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///x","_meta":{"k":[1,2]}}}`},
			{`{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"capabilities":{"sampling":{}}}}`,
				`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"capabilities":{"sampling":{}}}}`},
			{`{"jsonrpc":"2.0", "method":"notifications/cancelled","params":{"requestId":8, "reason":"r"}}`,
				`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"r"}}`},
			// Strings from their decoded values, unknown envelope members dropped.
			{`{"method":"notifications/x","extra":1,"params":{"a\u0062":"\u00e9\ud800\/\"","n":1.50},"jsonrpc":"2\u002e0"}`,
				`{"jsonrpc":"2.0","method":"notifications/x","params":{"ab":"é` + "\uFFFD" + `/\"","n":1.50}}`},
			{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		} {
			s.client(l.sent)
			if got := s.atServer(); got != l.want {
				t.Errorf("server got %s, want %s", got, l.want)
			}
		}
		for _, l := range []struct{ sent, want string }{
			{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}`,
				`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}`},
			{`{"jsonrpc":"2.0","id":99,"method":"sampling/createMessage","params":{"messages":[]}}`,
				`{"jsonrpc":"2.0","id":99,"method":"sampling/createMessage","params":{"messages":[]}}`},
			{`{"jsonrpc":"2.0","id":1,"result":{"contents":[]},"extra":true}`,
				`{"jsonrpc":"2.0","id":"a","result":{"contents":[]}}`},
		} {
			s.server(l.sent)
			if got := s.atClient(); got != l.want {
				t.Errorf("client got %s, want %s", got, l.want)
			}
		}
		// The client's answer to the server's request goes back as it is.
		l := `{"jsonrpc":"2.0","id":99,"result":{"content":"answer to the server's sampling request"}}`
		s.client(l)
		if got := s.atServer(); got != l {
			t.Errorf("server got %s, want %s", got, l)
		}
	})

	t.Run("filters tools/list and keeps the rest", func(t *testing.T) {
		s := newRaw(t, Rules{Deny: []string{"secret*"}})
		s.client(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c1"}}`)
		s.atServer()
		s.server(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"secret_x"},{"name":"b","NAME":"secret"},{"name":""}],"nextCursor":"c2","_meta":{"m":1}}}`)
		var got struct {
			ID     int `json:"id"`
			Result struct {
				Tools      []map[string]any `json:"tools"`
				NextCursor string           `json:"nextCursor"`
				Meta       map[string]any   `json:"_meta"`
			} `json:"result"`
		}
		line := s.atClient()
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Result.Tools) != 1 || got.Result.Tools[0]["name"] != "a" || got.Result.NextCursor != "c2" || got.Result.Meta["m"] != 1.0 || got.ID != 1 {
			t.Fatalf("filtered list %s", line)
		}
	})

	t.Run("withholds a tools/list result with a case-folded tools member", func(t *testing.T) {
		s := newRaw(t, Rules{Deny: []string{"secret"}})
		s.client(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		s.atServer()
		s.server(`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"Tools":[{"name":"secret"}]}}`)
		if got := s.atClient(); !strings.Contains(got, `"error"`) || strings.Contains(got, "secret\"}") {
			t.Fatalf("client got %s", got)
		}
	})

	t.Run("refuses hidden calls and ambiguous ones", func(t *testing.T) {
		s := newRaw(t, Rules{Allow: []string{"ok"}})
		for _, l := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hidden"}}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hidden","NAME":"ok"}}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ok","name":"hidden"}}`,
			`{"jsonrpc":"2.0","id":4,"method":"ping","METHOD":"tools/call","params":{"name":"hidden"}}`,
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"hidden"}`,
			`[{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"hidden"}}]`,
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ok"}`,
		} {
			s.client(l)
			got := s.atClient()
			var e struct {
				Error *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if json.Unmarshal([]byte(got), &e); e.Error == nil {
				t.Errorf("%s: client got %s, want an error", l, got)
			}
		}
		s.client(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"ok","arguments":{"a":1}}}`)
		if got := s.atServer(); !strings.Contains(got, `"name":"ok"`) {
			t.Fatalf("allowed call did not reach the server first: %s", got)
		}
		s.server(`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}`)
		if got := s.atClient(); !strings.Contains(got, `"id":8`) {
			t.Fatalf("client got %s, want the answer under its id 8", got)
		}
		var outcomes []string
		for _, r := range s.audit.records(t) {
			outcomes = append(outcomes, r.Tool+":"+r.Outcome)
		}
		// 1, 6 refused by the rules; 2-5 and 7 never parsed as a call.
		if want := "hidden:refused :refused :refused :refused :refused hidden:refused :refused ok:tool_error"; strings.Join(outcomes, " ") != want {
			t.Errorf("audit %v, want %s", outcomes, want)
		}
	})

	t.Run("drops what the server may not send", func(t *testing.T) {
		s := newRaw(t, Rules{})
		s.client(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		s.atServer()
		for _, l := range []string{
			`not json at all`,
			`{"jsonrpc":"2.0","id":42,"result":{"tools":[{"name":"unsolicited"}]}}`,
			`{"jsonrpc":"2.0","id":1,"ID":2,"result":{}}`,
			`{"jsonrpc":"2.0","id":1,"method":"x","result":{}}`,
		} {
			s.server(l)
		}
		s.server(`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`)
		if got := s.atClient(); got != `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}` {
			t.Fatalf("client got %s first", got)
		}
		// A second answer to the same request is dropped too.
		s.server(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"late"}]}}`)
		s.server(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"marker"}}`)
		if got := s.atClient(); !strings.Contains(got, "marker") {
			t.Fatalf("client got %s, want the marker", got)
		}
	})

	t.Run("cancelled call is forgotten and audited", func(t *testing.T) {
		s := newRaw(t, Rules{})
		s.client(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)
		s.atServer()
		s.client(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
		s.atServer()
		s.server(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
		s.server(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"marker"}}`)
		if got := s.atClient(); !strings.Contains(got, "marker") {
			t.Fatalf("client got %s, want the late answer dropped", got)
		}
		if r := s.audit.records(t); len(r) != 1 || r[0].Outcome != outcomeCancelled {
			t.Fatalf("audit %+v", r)
		}
	})

	t.Run("server message over the limit ends the session", func(t *testing.T) {
		s := newRaw(t, Rules{})
		s.client(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}`)
		s.atServer()
		go s.p.fromSrv.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("x", 2<<20) + "\"}}\n"))
		if got := s.atClient(); !strings.Contains(got, "over 1048576 bytes") {
			t.Fatalf("client got %.200s", got)
		}
		if err := <-s.errc; !errors.Is(err, ErrSessionEnded) || !strings.Contains(err.Error(), "over 1048576 bytes") {
			t.Fatalf("relay: %v", err)
		}
	})
}

// TestRelayFloodBounded: a server writing far more than the relay may hold
// is relayed in full, with the relay's heap staying small.
func TestRelayFloodBounded(t *testing.T) {
	s := newRaw(t, Rules{})
	const n, size = 20000, 4096 // 80 MiB
	line := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("y", size) + "\"}}\n"
	go func() {
		w := bufio.NewWriterSize(s.p.fromSrv, 1<<20)
		for i := 0; i < n; i++ {
			w.WriteString(line)
		}
		w.Flush()
		s.p.fromSrv.Close()
	}()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	runtime.GC()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > ms0.HeapInuse && ms.HeapInuse-ms0.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse - ms0.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var got int
	var total int64
	br := bufio.NewReaderSize(s.p.fromRelay, 1<<16)
	for {
		l, err := br.ReadSlice('\n')
		if err == nil {
			got++
			total += int64(len(l))
		} else if !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
	}
	close(stop)
	<-sampled
	if got != n || total != int64(n*len(line)) {
		t.Fatalf("client got %d messages, %d bytes; want %d, %d", got, total, n, n*len(line))
	}
	<-s.errc
	// 80 MiB went through; the relay holds one message at a time.
	if p := peak.Load(); p > 24<<20 {
		t.Errorf("heap in use peaked at %d MiB while relaying", p>>20)
	}
	t.Logf("heap in use peaked at %.1f MiB while relaying %d MiB", float64(peak.Load())/(1<<20), total>>20)
}

func BenchmarkRelayRoundTrip(b *testing.B) {
	p := newPipes()
	r := &relay{audit: &auditor{w: io.Discard, runID: "b", now: time.Now}, maxMessage: DefaultMaxMessage, log: slog.New(slog.DiscardHandler)}
	go r.run(context.Background(), p.streams, nil)
	// An echo server: answers every request with a small result.
	go func() {
		br := bufio.NewReader(p.toServer)
		for {
			l, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			e, _ := parseEnvelope(l)
			fmt.Fprintf(p.fromSrv, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`+"\n", e.obj["id"])
		}
	}()
	br := bufio.NewReader(p.fromRelay)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		fmt.Fprintf(p.toRelay, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`+"\n", i)
		if _, err := br.ReadBytes('\n'); err != nil {
			b.Fatal(err)
		}
	}
	p.toRelay.Close()
	p.fromSrv.Close()
}

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
}
