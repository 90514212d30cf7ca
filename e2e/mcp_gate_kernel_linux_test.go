package e2e

// The relay as a gate (issue 23), through the binary, against the hostile
// test server (mcptest.ServeHostile) and the npm servers. Each case has a
// control without the rule (or through `sandbox-run run`, which relays
// nothing) showing the attempt reaches the server there.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// rawMCP is sandbox-run spoken to line by line, as a client that can
// send what no SDK would.
type rawMCP struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string
	stderr *lockedBuffer
	exited chan struct{}
	code   int
}

func startRaw(t *testing.T, args ...string) *rawMCP {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*mcpTimeout)
	t.Cleanup(cancel)
	m := &rawMCP{t: t, lines: make(chan string, 1024), stderr: &lockedBuffer{}, exited: make(chan struct{})}
	m.cmd = exec.CommandContext(ctx, bin, args...)
	m.cmd.Stderr = m.stderr
	var err error
	if m.in, err = m.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		br := bufio.NewReaderSize(out, 1<<20)
		for {
			l, err := br.ReadString('\n')
			if l != "" {
				m.lines <- strings.TrimSuffix(l, "\n")
			}
			if err != nil {
				close(m.lines)
				return
			}
		}
	}()
	go func() {
		m.cmd.Wait()
		m.code = m.cmd.ProcessState.ExitCode()
		close(m.exited)
	}()
	t.Cleanup(func() {
		m.in.Close()
		select {
		case <-m.exited:
		case <-time.After(10 * time.Second):
			m.cmd.Process.Kill()
			<-m.exited
		}
	})
	return m
}

func (m *rawMCP) send(line string) {
	m.t.Helper()
	if _, err := io.WriteString(m.in, line+"\n"); err != nil {
		m.t.Fatalf("writing to sandbox-run: %v; stderr:\n%s", err, m.stderr)
	}
}

// next is the next line from sandbox-run ("" when its output ended).
func (m *rawMCP) next() string {
	m.t.Helper()
	select {
	case l := <-m.lines:
		return l
	case <-time.After(mcpTimeout):
		m.t.Fatalf("nothing from sandbox-run within %s; stderr:\n%s", mcpTimeout, m.stderr)
		return ""
	}
}

// reply reads until the response with id, handing requests from the
// server to onRequest (nil: they fail the test), and skipping
// notifications.
func (m *rawMCP) reply(id string, onRequest func(method string, id json.RawMessage)) rpcMsg {
	m.t.Helper()
	for {
		l := m.next()
		if l == "" {
			m.t.Fatalf("sandbox-run's output ended before the answer to %s; stderr:\n%s", id, m.stderr)
		}
		var msg rpcMsg
		if err := json.Unmarshal([]byte(l), &msg); err != nil {
			m.t.Fatalf("sandbox-run wrote %q: %v", l, err)
		}
		msg.line = l
		switch {
		case msg.Method != "" && msg.ID != nil:
			if onRequest == nil {
				m.t.Fatalf("unexpected request from the server: %s", l)
			}
			onRequest(msg.Method, msg.ID)
		case msg.Method != "":
		case string(msg.ID) == id:
			return msg
		default:
			m.t.Fatalf("an answer to %s while waiting for %s: %s", msg.ID, id, l)
		}
	}
}

type rpcMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	line string
}

func (m *rawMCP) initialize(caps string) {
	m.t.Helper()
	m.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":` + caps + `,"clientInfo":{"name":"e2e-raw","version":"1"}}}`)
	if r := m.reply(`"init"`, nil); r.Error != nil {
		m.t.Fatalf("initialize: %s", r.line)
	}
	m.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// wait waits for sandbox-run to exit and returns its status.
func (m *rawMCP) wait(within time.Duration) int {
	m.t.Helper()
	select {
	case <-m.exited:
		return m.code
	case <-time.After(within):
		m.t.Fatalf("sandbox-run still running after %s; stderr:\n%s", within, m.stderr)
		return -1
	}
}

// hostileArgs starts the hostile server through mode (run or mcp) on w.
func hostileArgs(t *testing.T, mode, w string, flags ...string) []string {
	srv := goServer(t)
	args := append([]string{mode, "--workdir", w, "--read", filepath.Dir(srv)}, flags...)
	return append(args, "--", srv, mcptest.HostileArg)
}

// TestMCPGateMalformedNames: a tools/call whose name is not a string makes
// the hostile server run write_file, the denied tool, when nothing stands
// between (control: `run`). Through the relay it is refused with -32602
// and audited with what was sent, and no file appears.
func TestMCPGateMalformedNames(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	names := []string{`["write_file"]`, `{"name":"write_file"}`, `null`, ``}
	call := func(m *rawMCP, i int, name, path string) rpcMsg {
		params := `{"name":` + name + `,"arguments":{"path":"` + path + `","content":"x"}}`
		if name == "" {
			params = `{"arguments":{"path":"` + path + `","content":"x"}}`
		}
		m.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, i, params))
		return m.reply(fmt.Sprint(i), nil)
	}
	w := sandboxtest.WorkDir(t)
	ctl := startRaw(t, hostileArgs(t, "run", w)...)
	ctl.initialize(`{}`)
	for i, name := range names {
		path := filepath.Join(w, fmt.Sprintf("control-%d", i))
		call(ctl, i, name, path)
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("control: name %s did not run write_file (untested): %v", name, err)
		}
	}

	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	m := startRaw(t, hostileArgs(t, "mcp", w, "--deny-tool", "write_file", "--audit", audit)...)
	m.initialize(`{}`)
	for i, name := range names {
		path := filepath.Join(w, fmt.Sprintf("relay-%d", i))
		r := call(m, i, name, path)
		if r.Error == nil || r.Error.Code != -32602 {
			t.Errorf("name %s: %s, want -32602", name, r.line)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("name %s: the denied tool ran through the relay", name)
		}
	}
	m.in.Close()
	m.wait(mcpTimeout)
	var sent []string
	for _, rec := range auditLines(t, audit) {
		if rec["event"] == "mcp_call" && rec["outcome"] == "refused" {
			s, _ := rec["name_sent"].(string)
			sent = append(sent, s)
		}
	}
	if want := []string{`["write_file"]`, `{"name":"write_file"}`, `null`, ``}; fmt.Sprint(sent) != fmt.Sprint(want) {
		t.Errorf("audit name_sent %q, want %q", sent, want)
	}
}

// TestMCPGateExactIDs: the hostile server reads ids as float64, so 2^53
// and 2^53+1 come back as one id when nothing stands between (control).
// Through the relay each request gets its own answer under its exact id,
// and tools/list stays filtered.
func TestMCPGateExactIDs(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	const a, b = "9007199254740992", "9007199254740993"
	list := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{"cursor":"page2"}}`
	}
	ctl := startRaw(t, hostileArgs(t, "run", w)...)
	ctl.initialize(`{}`)
	ctl.send(list(b))
	if got := ctl.next(); !strings.Contains(got, `"id":`+a) {
		t.Fatalf("control: the server answered %s as %s; the collision is untested", b, got)
	}

	m := startRaw(t, hostileArgs(t, "mcp", w, "--deny-tool", "write_file")...)
	m.initialize(`{}`)
	m.send(list(a))
	m.send(list(b))
	for _, id := range []string{a, b} {
		r := m.reply(id, nil)
		if r.Error != nil || strings.Contains(string(r.Result), "write_file") || !strings.Contains(string(r.Result), "endless") {
			t.Errorf("answer to %s: %s", id, r.line)
		}
	}
	// A pending id used again is refused.
	m.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"never"}}`)
	m.send(list("7"))
	if r := m.reply("7", nil); r.Error == nil || r.Error.Code != -32600 {
		t.Errorf("reused id: %s", r.line)
	}
	m.send(`{"jsonrpc":"2.0","id":null,"method":"tools/list"}`)
	if r := m.reply("null", nil); r.Error == nil || r.Error.Code != -32600 {
		t.Errorf("null id: %s", r.line)
	}
}

// TestMCPGateResultAndError: a response with both members reaches the
// client as an error through the relay; as it is through `run` (control).
func TestMCPGateResultAndError(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	for _, mode := range []string{"run", "mcp"} {
		m := startRaw(t, hostileArgs(t, mode, w)...)
		m.initialize(`{}`)
		m.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"both"}}`)
		r := m.reply("1", nil)
		switch {
		case mode == "run" && (r.Result == nil || r.Error == nil):
			t.Fatalf("control: %s (untested)", r.line)
		case mode == "mcp" && (r.Result != nil || r.Error == nil || r.Error.Code != -32001):
			t.Errorf("relay: %s, want only the error", r.line)
		}
	}
}

// TestMCPGateEndlessLine: a server writing a line that never ends is
// ended within a second of the relay giving up, and mcp_end says why.
// Control: under a limit it does not reach in the same time, the session
// is still running.
func TestMCPGateEndlessLine(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)

	ctl := startRaw(t, hostileArgs(t, "mcp", w, "--max-message", "1073741824")...)
	ctl.initialize(`{}`)
	ctl.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"endless"}}`)
	select {
	case <-ctl.exited:
		t.Fatalf("control: the session ended under a 1 GiB limit (untested); stderr:\n%s", ctl.stderr)
	case <-time.After(2 * time.Second):
	}

	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	m := startRaw(t, hostileArgs(t, "mcp", w, "--max-message", "1048576", "--audit", audit)...)
	m.initialize(`{}`)
	m.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"endless"}}`)
	r := m.reply("1", nil)
	if r.Error == nil || !strings.Contains(r.Error.Message, "over 1048576 bytes") {
		t.Fatalf("pending call: %s", r.line)
	}
	start := time.Now()
	code := m.wait(time.Second * sandboxtest.Slowdown * 3)
	t.Logf("sandbox-run exited %d, %s after the pending call was answered", code, time.Since(start))
	if took := time.Since(start); took > time.Second*sandboxtest.Slowdown {
		t.Errorf("the server was ended %s after the relay gave up, want within a second", took)
	}
	if code == 0 || !strings.Contains(m.stderr.String(), "over 1048576 bytes") {
		t.Errorf("exit %d, stderr %q: want a failure saying why", code, m.stderr)
	}
	var reason string
	for _, rec := range auditLines(t, audit) {
		if rec["event"] == "mcp_end" {
			reason, _ = rec["reason"].(string)
		}
	}
	if !strings.Contains(reason, "over 1048576 bytes") || !strings.Contains(reason, "the server was ended") {
		t.Errorf("mcp_end reason %q", reason)
	}
}

// TestMCPGateFloodRSS: 100k requests a server never answers, then 32 calls
// with 10 MiB arguments under --audit-args: sandbox-run's peak RSS stays
// bounded. Control: with --max-pending as large as the flood, the same
// flood costs visibly more, so the measure sees the records.
func TestMCPGateFloodRSS(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	flood := func(extra ...string) int64 {
		args := append([]string{"mcp", "--workdir", w, "--max-message", "16777216", "--audit-args",
			"--audit", filepath.Join(t.TempDir(), "audit.jsonl")}, extra...)
		m := startRaw(t, append(args, "--", "sh", "-c", "cat >/dev/null")...)
		last := make(chan struct{})
		go func() {
			for l := range m.lines { // read every refusal
				if strings.Contains(l, `"id":"last"`) {
					close(last)
				}
			}
		}()
		bw := bufio.NewWriterSize(m.in, 1<<16)
		for i := range 100_000 {
			fmt.Fprintf(bw, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}`+"\n", i)
		}
		big := `{"a":"` + strings.Repeat("z", 10<<20) + `"}`
		for i := range 32 {
			fmt.Fprintf(bw, `{"jsonrpc":"2.0","id":"big-%d","method":"tools/call","params":{"name":"t","arguments":%s}}`+"\n", i, big)
		}
		// A last request the relay refuses at once, whatever the caps:
		// its answer says every earlier line was read.
		bw.WriteString(`{"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":null}}` + "\n")
		if err := bw.Flush(); err != nil {
			t.Fatalf("flood: %v; stderr:\n%s", err, m.stderr)
		}
		select {
		case <-last:
		case <-time.After(60 * time.Second * sandboxtest.Slowdown):
			t.Fatalf("sandbox-run did not read the flood in time; stderr:\n%s", m.stderr)
		}
		hwm := vmHWM(t, m.cmd.Process.Pid)
		m.in.Close()
		m.wait(mcpTimeout)
		return hwm
	}
	capped := flood()
	uncapped := flood("--max-pending", "1048576")
	t.Logf("peak RSS: %d MiB capped, %d MiB with --max-pending 1048576 (control)", capped>>20, uncapped>>20)
	if uncapped < capped+16<<20 {
		t.Errorf("control: uncapped %d MiB vs capped %d MiB: the measure does not see the pending records (untested)", uncapped>>20, capped>>20)
	}
	if capped > 80<<20 {
		t.Errorf("peak RSS %d MiB under the flood, want it bounded under 80 MiB", capped>>20)
	}
}

// TestMCPGateKinds: prompts by name and resources by URI are filtered and
// refused like tools, completions and subscriptions with them; allow-list
// mode closes the kinds it does not name. Control: without rules, every
// attempt reaches the hostile server.
func TestMCPGateKinds(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	uses := []string{
		`{"jsonrpc":"2.0","id":"u1","method":"prompts/get","params":{"name":"secret_prompt"}}`,
		`{"jsonrpc":"2.0","id":"u2","method":"resources/read","params":{"uri":"file:///priv/key"}}`,
		`{"jsonrpc":"2.0","id":"u3","method":"resources/subscribe","params":{"uri":"file:///priv/key"}}`,
		`{"jsonrpc":"2.0","id":"u4","method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"secret_prompt"},"argument":{"name":"a","value":""}}}`,
		`{"jsonrpc":"2.0","id":"u5","method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///priv/{name}"},"argument":{"name":"name","value":""}}}`,
	}
	lists := func(m *rawMCP) string {
		var all []string
		for i, method := range []string{"prompts/list", "resources/list", "resources/templates/list"} {
			m.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"l%d","method":%q}`, i, method))
			all = append(all, string(m.reply(fmt.Sprintf(`"l%d"`, i), nil).Result))
		}
		return strings.Join(all, " ")
	}
	for _, tc := range []struct {
		name    string
		flags   []string
		visible bool
	}{
		{"control", nil, true},
		{"deny", []string{"--deny-prompt", "secret_*", "--deny-resource", "file:///priv/*"}, false},
		{"allow", []string{"--allow-prompt", "greet", "--allow-resource", "file:///pub/*", "--allow-tool", "*"}, false},
		{"allow-list mode", []string{"--allow-tool", "*"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit := filepath.Join(t.TempDir(), "audit.jsonl")
			m := startRaw(t, hostileArgs(t, "mcp", w, append(tc.flags, "--audit", audit)...)...)
			m.initialize(`{}`)
			got := lists(m)
			for _, hidden := range []string{"secret_prompt", "file:///priv/key", "file:///priv/{name}"} {
				if strings.Contains(got, hidden) != tc.visible {
					t.Errorf("lists %s: %s visible %v, want %v", got, hidden, !tc.visible, tc.visible)
				}
			}
			for _, u := range uses {
				m.send(u)
				var id struct{ ID json.RawMessage }
				json.Unmarshal([]byte(u), &id)
				r := m.reply(string(id.ID), nil)
				if tc.visible != (r.Error == nil) {
					t.Errorf("%s: %s", u, r.line)
				}
			}
			m.in.Close()
			m.wait(mcpTimeout)
			methods := map[string]string{}
			for _, rec := range auditLines(t, audit) {
				if rec["event"] == "mcp_request" {
					methods[fmt.Sprint(rec["method"])] = fmt.Sprint(rec["outcome"])
				}
			}
			for _, m := range []string{"initialize", "prompts/list", "resources/list", "prompts/get", "resources/read", "resources/subscribe", "completion/complete"} {
				want := "ok"
				if !tc.visible && (m == "prompts/get" || m == "resources/read" || m == "resources/subscribe" || m == "completion/complete") {
					want = "refused"
				}
				if methods[m] != want {
					t.Errorf("audit: %s %q, want %q (%v)", m, methods[m], want, methods)
				}
			}
		})
	}
}

// TestMCPGateServerRequests: sampling, elicitation and roots requests
// from the hostile server reach the client only when it declared the
// capability and no --deny-server-request refuses them. Control: through
// `run`, they reach a client that declared nothing.
func TestMCPGateServerRequests(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	sample := func(m *rawMCP) (string, []string) {
		var seen []string
		m.send(`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"sample"}}`)
		r := m.reply(`"s"`, func(method string, id json.RawMessage) {
			seen = append(seen, method)
			m.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"role":"assistant","content":{"type":"text","text":"ok"},"model":"m","roots":[]}}`)
		})
		return string(r.Result), seen
	}
	ctl := startRaw(t, hostileArgs(t, "run", w)...)
	ctl.initialize(`{}`)
	if _, seen := sample(ctl); len(seen) != 3 {
		t.Fatalf("control: the client saw %v, want all three (untested)", seen)
	}
	all := `{"sampling":{},"elicitation":{},"roots":{}}`
	for _, tc := range []struct {
		name, caps string
		flags      []string
		want       []string
	}{
		{"nothing declared", `{}`, nil, nil},
		{"declared", all, nil, []string{"sampling/createMessage", "elicitation/create", "roots/list"}},
		{"declared, sampling and elicitation denied", all,
			[]string{"--deny-server-request", "sampling/createMessage", "--deny-server-request", "elicitation/create"}, []string{"roots/list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit := filepath.Join(t.TempDir(), "audit.jsonl")
			m := startRaw(t, hostileArgs(t, "mcp", w, append(tc.flags, "--audit", audit)...)...)
			m.initialize(tc.caps)
			res, seen := sample(m)
			if fmt.Sprint(seen) != fmt.Sprint(tc.want) {
				t.Errorf("the client saw %v, want %v", seen, tc.want)
			}
			if n := strings.Count(res, "error -32601"); n != 3-len(tc.want) {
				t.Errorf("the server got %d refusals, want %d: %s", n, 3-len(tc.want), res)
			}
			m.in.Close()
			m.wait(mcpTimeout)
			var recs []string
			for _, rec := range auditLines(t, audit) {
				if rec["event"] == "mcp_server_request" {
					recs = append(recs, fmt.Sprint(rec["method"], ":", rec["outcome"]))
				}
			}
			if len(recs) != 3 {
				t.Errorf("audit %v, want three server requests", recs)
			}
		})
	}
}

// TestMCPGateEverythingServer: server-everything's own sampling tool and
// prompts through the relay: --deny-server-request and --deny-prompt hold,
// and without them (control) the same attempts succeed.
func TestMCPGateEverythingServer(t *testing.T) {
	needBwrap(t)
	npm := mcptest.NPMServers(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	for _, deny := range []bool{false, true} {
		args := []string{"mcp", "--workdir", w, "--read", npm.Dir}
		if deny {
			args = append(args, "--deny-server-request", "sampling/createMessage", "--deny-prompt", "simple-prompt")
		}
		m := startRaw(t, append(args, "--", npm.Node, npm.Everything(), "stdio")...)
		m.initialize(`{"sampling":{}}`)
		var sampled int
		m.send(`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"trigger-sampling-request","arguments":{"prompt":"hi","maxTokens":5}}}`)
		r := m.reply(`"s"`, func(method string, id json.RawMessage) {
			if method == "sampling/createMessage" {
				sampled++
			}
			m.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"role":"assistant","content":{"type":"text","text":"sampled-ok"},"model":"m"}}`)
		})
		answered := strings.Contains(string(r.Result), "sampled-ok")
		m.send(`{"jsonrpc":"2.0","id":"p","method":"prompts/get","params":{"name":"simple-prompt"}}`)
		p := m.reply(`"p"`, nil)
		if deny {
			if sampled != 0 || answered || p.Error == nil {
				t.Errorf("denied: sampled %d, answered %v (%s), prompt %s", sampled, answered, r.line, p.line)
			}
		} else if sampled != 1 || !answered || p.Error != nil {
			t.Fatalf("control: sampled %d, answered %v (%s), prompt %s (untested)", sampled, answered, r.line, p.line)
		}
	}
}

// TestMCPGateRedaction: --audit-args keeps argument values with secrets
// redacted; --audit-args=raw (the control) keeps them as sent. The server
// gets them as sent either way.
func TestMCPGateRedaction(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	secret := "ghp_" + token(t) + token(t) + "abcd"
	for _, mode := range []string{"--audit-args", "--audit-args=raw"} {
		audit := filepath.Join(t.TempDir(), "audit.jsonl")
		m := startRaw(t, hostileArgs(t, "mcp", w, mode, "--audit", audit)...)
		m.initialize(`{}`)
		m.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + secret + `"}}}`)
		if r := m.reply("1", nil); !strings.Contains(string(r.Result), secret) {
			t.Fatalf("%s: the server did not get the argument: %s", mode, r.line)
		}
		m.in.Close()
		m.wait(mcpTimeout)
		b, _ := os.ReadFile(audit)
		raw := mode == "--audit-args=raw"
		if strings.Contains(string(b), secret) != raw || strings.Contains(string(b), `"[redacted]"`) == raw {
			t.Errorf("%s: audit %s", mode, b)
		}
	}
}

// TestMCPGatePin: the first session with --pin records the tool
// definitions; a later one hides and refuses a tool whose definition the
// hostile server changed (a rug pull), with a line on stderr and an audit
// record. Control: without --pin the changed definition reaches the client
// (flagged in the audit only), and its call reaches the server.
func TestMCPGatePin(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	pin := filepath.Join(t.TempDir(), "pins.json")
	listAll := func(m *rawMCP) string {
		m.send(`{"jsonrpc":"2.0","id":"p1","method":"tools/list"}`)
		a := m.reply(`"p1"`, nil)
		m.send(`{"jsonrpc":"2.0","id":"p2","method":"tools/list","params":{"cursor":"page2"}}`)
		b := m.reply(`"p2"`, nil)
		return string(a.Result) + string(b.Result)
	}
	callEcho := func(m *rawMCP) rpcMsg {
		m.send(`{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
		return m.reply(`"e"`, nil)
	}

	rec := startRaw(t, hostileArgs(t, "mcp", w, "--pin", pin)...)
	rec.initialize(`{}`)
	listAll(rec)
	rec.in.Close()
	if code := rec.wait(mcpTimeout); code != 0 || !strings.Contains(rec.stderr.String(), "tools 7") {
		t.Fatalf("recording session: exit %d, stderr %s", code, rec.stderr)
	}

	for _, pinned := range []bool{false, true} {
		audit := filepath.Join(t.TempDir(), "audit.jsonl")
		flags := []string{"--env", "HOSTILE_RUGPULL=1", "--audit", audit}
		if pinned {
			flags = append(flags, "--pin", pin)
		}
		m := startRaw(t, hostileArgs(t, "mcp", w, flags...)...)
		m.initialize(`{}`)
		if first := listAll(m); !strings.Contains(first, `"echo"`) {
			t.Fatalf("pinned %v: the unchanged echo is hidden: %s", pinned, first)
		}
		second := listAll(m) // the server now describes echo otherwise
		r := callEcho(m)
		m.in.Close()
		m.wait(mcpTimeout)
		var outcome string
		for _, rec := range auditLines(t, audit) {
			if rec["event"] == "mcp_tool_changed" && rec["tool"] == "echo" {
				outcome, _ = rec["outcome"].(string)
			}
		}
		if !pinned {
			if !strings.Contains(second, "id_rsa") || r.Error != nil || outcome != "flagged" {
				t.Fatalf("control: list %s, call %s, audit %q (untested)", second, r.line, outcome)
			}
			continue
		}
		if strings.Contains(second, "id_rsa") || strings.Contains(second, `"echo"`) {
			t.Errorf("the changed echo was listed: %s", second)
		}
		if r.Error == nil || !strings.Contains(r.Error.Message, "--pin: definition differs") {
			t.Errorf("a call to the changed echo: %s", r.line)
		}
		if outcome != "hidden" || !strings.Contains(m.stderr.String(), "tool definition hidden") {
			t.Errorf("audit outcome %q, stderr %s", outcome, m.stderr)
		}
	}
}
