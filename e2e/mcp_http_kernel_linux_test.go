package e2e

// `sandbox-run mcp --listen` (issue 23 item 7): the Streamable HTTP
// transport through the binary, spoken to raw over net/http and by a real
// client, the MCP Inspector's CLI. Every refusal has a control: the same
// request with the right token, no Origin, a loopback Host, or without the
// rule, gets through.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// httpMCP is a running `sandbox-run mcp --listen 127.0.0.1:0`.
type httpMCP struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	token  string
	stderr *lockedBuffer
	exited chan struct{}
	code   int
}

var (
	listenRE = regexp.MustCompile(`serving MCP over HTTP at (http://\S+)`)
	tokenRE  = regexp.MustCompile(`bearer token \(printed once[^)]*\): (\S+)`)
)

// startHTTP starts the hostile-free mcptest server behind --listen on w.
func startHTTP(t *testing.T, w string, flags ...string) *httpMCP {
	t.Helper()
	srv := goServer(t)
	return startHTTPServer(t, 4*mcpTimeout, w, []string{srv}, append([]string{"--read", filepath.Dir(srv)}, flags...)...)
}

// startHTTPServer starts server behind --listen on w, to be killed if it
// still runs after life.
func startHTTPServer(t *testing.T, life time.Duration, w string, server []string, flags ...string) *httpMCP {
	t.Helper()
	args := append([]string{"mcp", "--listen", "127.0.0.1:0", "--workdir", w}, flags...)
	args = append(append(args, "--"), server...)
	ctx, cancel := context.WithTimeout(context.Background(), life)
	t.Cleanup(cancel)
	h := &httpMCP{t: t, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	h.cmd = exec.CommandContext(ctx, bin, args...)
	h.cmd.Stderr = h.stderr
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		h.cmd.Wait()
		h.code = h.cmd.ProcessState.ExitCode()
		close(h.exited)
	}()
	t.Cleanup(func() {
		h.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-h.exited:
		case <-time.After(2 * mcpTimeout):
			h.cmd.Process.Kill()
			<-h.exited
		}
	})
	deadline := time.Now().Add(mcpTimeout)
	for time.Now().Before(deadline) {
		out := h.stderr.String()
		u, tk := listenRE.FindStringSubmatch(out), tokenRE.FindStringSubmatch(out)
		if u != nil && (tk != nil || strings.Contains(strings.Join(args, " "), "--token-file")) {
			h.url = u[1]
			if tk != nil {
				h.token = tk[1]
			}
			return h
		}
		select {
		case <-h.exited:
			t.Fatalf("sandbox-run exited %d before listening; stderr:\n%s", h.code, out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("sandbox-run did not say where it listens within %s; stderr:\n%s", mcpTimeout, h.stderr)
	return nil
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e-http","version":"1"}}}`

// do sends one request; hdr holds extra headers ("Authorization" set to
// the right token unless given; "" removes it).
func (h *httpMCP) do(method, body string, hdr map[string]string) (*http.Response, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+h.token)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
		if v == "" {
			req.Header.Del(k)
		}
	}
	c := &http.Client{Timeout: mcpTimeout}
	res, err := c.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v; stderr:\n%s", method, h.url, err, h.stderr)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res, string(b)
}

// initialize begins a session and returns its id.
func (h *httpMCP) initialize() string {
	h.t.Helper()
	res, body := h.do("POST", initBody, nil)
	sid := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != 200 || sid == "" || !strings.Contains(body, `"protocolVersion"`) {
		h.t.Fatalf("initialize: %d session %q body %q; stderr:\n%s", res.StatusCode, sid, body, h.stderr)
	}
	if r, _ := h.do("POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Mcp-Session-Id": sid}); r.StatusCode != 202 {
		h.t.Fatalf("notifications/initialized: %d", r.StatusCode)
	}
	return sid
}

// inspector runs the MCP Inspector's CLI against the listener.
func (h *httpMCP) inspector(npm mcptest.NPM, args ...string) (string, error) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mcpTimeout)
	defer cancel()
	cli := npm.InspectorCLI()
	all := append([]string{cli, h.url, "--transport", "http", "--header", "Authorization: Bearer " + h.token}, args...)
	cmd := exec.CommandContext(ctx, npm.Node, all...)
	cmd.Dir = filepath.Dir(cli)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestMCPHTTPAccess: the token, the Origin and the Host are checked
// before anything else, each with its control.
func TestMCPHTTPAccess(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	h := startHTTP(t, sandboxtest.WorkDir(t), "--allow-origin", "http://ok.example")
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"no token", map[string]string{"Authorization": ""}, 401},
		{"wrong token", map[string]string{"Authorization": "Bearer " + strings.Repeat("x", len(h.token))}, 401},
		{"token as basic auth", map[string]string{"Authorization": "Basic " + h.token}, 401},
		{"foreign origin", map[string]string{"Origin": "http://evil.example"}, 403},
		{"origin null", map[string]string{"Origin": "null"}, 403},
		{"rebound host", map[string]string{"Host": "evil.example:" + h.url[strings.LastIndex(h.url, ":")+1:]}, 403},
		{"allowed origin (control)", map[string]string{"Origin": "http://ok.example"}, 200},
		{"right token (control)", nil, 200},
	} {
		res, body := h.do("POST", initBody, c.hdr)
		if res.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d; body %s", c.name, res.StatusCode, c.want, body)
		}
		if c.want != 200 && res.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: refused, yet a session was begun", c.name)
		}
		if c.want == 200 && !strings.Contains(body, `"serverInfo"`) {
			t.Errorf("%s: no initialize result: %s", c.name, body)
		}
	}
}

// TestMCPHTTPTokenFile: --token-file's token is the one required, and
// none is printed. Control: the file's token gets in, another does not.
func TestMCPHTTPTokenFile(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	tok := "file-token-" + token(t) + token(t)
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHTTP(t, sandboxtest.WorkDir(t), "--token-file", f)
	if strings.Contains(h.stderr.String(), tok) || h.token != "" {
		t.Errorf("the token from --token-file was printed:\n%s", h.stderr)
	}
	h.token = tok
	if res, body := h.do("POST", initBody, nil); res.StatusCode != 200 {
		t.Errorf("control: the file's token: %d %s", res.StatusCode, body)
	}
	if res, _ := h.do("POST", initBody, map[string]string{"Authorization": "Bearer " + tok + "x"}); res.StatusCode != 401 {
		t.Errorf("another token: %d, want 401", res.StatusCode)
	}
}

// TestMCPHTTPStreams: a server notification made while a request is in
// flight reaches the client on that request's event stream, before its
// response. Control: without a progress token the server sends none, and
// the stream holds the response alone.
func TestMCPHTTPStreams(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	h := startHTTP(t, sandboxtest.WorkDir(t))
	sid := h.initialize()
	call := func(id int, meta string) string {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"progress","arguments":{"steps":3,"delay_ms":100}%s}}`, id, meta)
		res, out := h.do("POST", body, map[string]string{"Mcp-Session-Id": sid})
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("tools/call: %d %s %s", res.StatusCode, res.Header.Get("Content-Type"), out)
		}
		return out
	}
	ctl := call(1, "")
	if strings.Count(ctl, "data: ") != 1 || !strings.Contains(ctl, "0 notifications") {
		t.Fatalf("control: without a progress token the stream should hold the response alone:\n%s", ctl)
	}
	out := call(2, `,"_meta":{"progressToken":"p1"}`)
	// mcp-go queues notifications apart from results, so the last step's
	// may follow the response (and, with no GET stream open, be dropped);
	// those of the steps before come 100 ms ahead of it.
	events := strings.Split(strings.TrimSpace(out), "\n\n")
	last := events[len(events)-1]
	if len(events) < 3 || !strings.Contains(last, `"id":2`) || !strings.Contains(last, "3 notifications") {
		t.Fatalf("want at least 2 progress events, then the response:\n%s", out)
	}
	for i, ev := range events[:len(events)-1] {
		if !strings.Contains(ev, "notifications/progress") || !strings.Contains(ev, `"p1"`) || !strings.Contains(ev, fmt.Sprintf(`"progress":%d`, i+1)) {
			t.Errorf("event %d is not progress step %d: %s", i, i+1, ev)
		}
	}
}

// TestMCPHTTPIdle: a session left without a request or a stream for
// --session-idle is ended and its id answers 404. Control: used within
// the idle time it answers.
func TestMCPHTTPIdle(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	h := startHTTP(t, sandboxtest.WorkDir(t), "--session-idle", "2s")
	sid := h.initialize()
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	if res, body := h.do("POST", ping, map[string]string{"Mcp-Session-Id": sid}); res.StatusCode != 200 {
		t.Fatalf("control: ping within the idle time: %d %s", res.StatusCode, body)
	}
	deadline := time.Now().Add(mcpTimeout)
	for {
		time.Sleep(500 * time.Millisecond)
		res, _ := h.do("POST", ping, map[string]string{"Mcp-Session-Id": sid})
		if res.StatusCode == 404 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle session still answers %d after %s", res.StatusCode, mcpTimeout)
		}
		// A ping counts as use: let the session idle for longer than 2 s.
		time.Sleep(3 * time.Second)
	}
}

// TestMCPHTTPSessions: sessions are named by Mcp-Session-Id, end on
// DELETE, are bounded in number (at the cap a new session ends the least
// recently used idle one; with every session busy it gets 503), and a
// body over --max-message is refused.
func TestMCPHTTPSessions(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	h := startHTTP(t, sandboxtest.WorkDir(t), "--max-sessions", "2", "--max-message", "8192")
	a := h.initialize()
	b := h.initialize()
	if a == b {
		t.Fatalf("two sessions share the id %s", a)
	}
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	if res, body := h.do("POST", ping, map[string]string{"Mcp-Session-Id": a}); res.StatusCode != 200 || !strings.Contains(body, `"id":7`) {
		t.Fatalf("ping in session a: %d %s", res.StatusCode, body)
	}
	h.stream(a) // a is busy
	c := h.initialize()
	if res, _ := h.do("POST", ping, map[string]string{"Mcp-Session-Id": b}); res.StatusCode != 404 {
		t.Errorf("b, idle, after a third session with --max-sessions 2: %d, want 404 (ended for the new one)", res.StatusCode)
	}
	if res, body := h.do("POST", ping, map[string]string{"Mcp-Session-Id": a}); res.StatusCode != 200 {
		t.Errorf("control: a, busy, after a third session: %d %s, want 200", res.StatusCode, body)
	}
	stopC := h.stream(c)
	if res, body := h.do("POST", initBody, nil); res.StatusCode != 503 {
		t.Errorf("a new session with every session busy: %d %s, want 503", res.StatusCode, body)
	}
	stopC()
	big := `{"jsonrpc":"2.0","id":8,"method":"ping","params":{"x":"` + strings.Repeat("a", 9000) + `"}}`
	if res, _ := h.do("POST", big, map[string]string{"Mcp-Session-Id": a}); res.StatusCode != 413 {
		t.Errorf("a body over --max-message: %d, want 413", res.StatusCode)
	}
	if res, _ := h.do("POST", ping, map[string]string{"Mcp-Session-Id": "nosuchsession"}); res.StatusCode != 404 {
		t.Errorf("an unknown session: %d, want 404", res.StatusCode)
	}
	if res, _ := h.do("POST", ping, nil); res.StatusCode != 400 {
		t.Errorf("no session header: %d, want 400", res.StatusCode)
	}
	if res, _ := h.do("DELETE", "", map[string]string{"Mcp-Session-Id": a}); res.StatusCode != 204 {
		t.Fatalf("DELETE: %d, want 204", res.StatusCode)
	}
	if res, _ := h.do("POST", ping, map[string]string{"Mcp-Session-Id": a}); res.StatusCode != 404 {
		t.Errorf("a deleted session: %d, want 404", res.StatusCode)
	}
	// Its place is free again: a new session ends none.
	deadline := time.Now().Add(mcpTimeout)
	for {
		res, _ := h.do("POST", initBody, nil)
		if res.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new session after DELETE: %d", res.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res, body := h.do("POST", ping, map[string]string{"Mcp-Session-Id": c}); res.StatusCode != 200 || !strings.Contains(body, `"id":7`) {
		t.Errorf("session c after a's end: %d %s", res.StatusCode, body)
	}
}

// stream opens the session's GET stream, which keeps it busy until the
// returned func (or the test's end) closes it.
func (h *httpMCP) stream(sid string) func() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", h.url, nil)
	req.Header.Set("Authorization", "Bearer "+h.token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		cancel()
		h.t.Fatalf("GET stream of %s: %v %v", sid, err, res)
	}
	stop := func() {
		cancel()
		res.Body.Close()
	}
	h.t.Cleanup(stop)
	return stop
}

// TestMCPHTTPInspector: a real client (the MCP Inspector CLI) lists and
// calls tools over HTTP; --deny-tool hides write_file and refuses its
// call, and the audit says so. Control: without the rule the same client
// sees it and its call writes the file.
func TestMCPHTTPInspector(t *testing.T) {
	needBwrap(t)
	npm := mcptest.NPMServers(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	ctl := startHTTP(t, w)
	out, err := ctl.inspector(npm, "--method", "tools/list")
	if err != nil || !strings.Contains(out, `"write_file"`) {
		t.Fatalf("control: the inspector's tools/list: %v\n%s\nstderr:\n%s", err, out, ctl.stderr)
	}
	ctlFile := filepath.Join(w, "control")
	out, err = ctl.inspector(npm, "--method", "tools/call", "--tool-name", "write_file", "--tool-arg", "path="+ctlFile, "content=x")
	if _, serr := os.Stat(ctlFile); err != nil || serr != nil {
		t.Fatalf("control: write_file over HTTP did not write (untested): %v %v\n%s", err, serr, out)
	}

	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	h := startHTTP(t, w, "--deny-tool", "write_file", "--audit", audit)
	out, err = h.inspector(npm, "--method", "tools/list")
	if err != nil || strings.Contains(out, `"write_file"`) || !strings.Contains(out, `"echo"`) {
		t.Errorf("tools/list with --deny-tool write_file: %v\n%s", err, out)
	}
	denied := filepath.Join(w, "denied")
	out, err = h.inspector(npm, "--method", "tools/call", "--tool-name", "write_file", "--tool-arg", "path="+denied, "content=x")
	if err == nil || !strings.Contains(out, "-32602") || !strings.Contains(out, "--deny-tool") {
		t.Errorf("the denied call: %v\n%s", err, out)
	}
	if _, err := os.Stat(denied); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the denied write_file ran: %v", err)
	}
	out, err = h.inspector(npm, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=over-http")
	if err != nil || !strings.Contains(out, "over-http") {
		t.Errorf("echo over HTTP: %v\n%s", err, out)
	}
	h.stop(t)
	var starts, refused int
	for _, rec := range auditLines(t, audit) {
		if rec["event"] == "mcp_start" && strings.HasPrefix(fmt.Sprint(rec["client"]), "http 127.0.0.1:") {
			starts++
		}
		if rec["event"] == "mcp_call" && rec["tool"] == "write_file" && rec["outcome"] == "refused" {
			refused++
		}
	}
	if starts != 3 || refused != 1 {
		t.Errorf("audit: %d mcp_start with an http client (want 3, one per inspector session), %d refused write_file (want 1)", starts, refused)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (h *httpMCP) stop(t *testing.T) {
	t.Helper()
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.exited:
	case <-time.After(mcpTimeout):
		t.Fatalf("sandbox-run did not exit within %s of SIGTERM; stderr:\n%s", mcpTimeout, h.stderr)
	}
	if h.code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0; stderr:\n%s", h.code, h.stderr)
	}
}

// TestMCPHTTPShutdown: ending the listener ends every session's sandboxed
// server. Control: before, each session has its server running.
func TestMCPHTTPShutdown(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	h := startHTTP(t, sandboxtest.WorkDir(t))
	const n = 3
	for i := 0; i < n; i++ {
		h.initialize()
	}
	before := descendants(t, h.cmd.Process.Pid)
	servers := 0
	for _, pid := range before {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), "mcptest-server") &&
			!strings.Contains(string(b), "bwrap") {
			servers++
		}
	}
	if servers < n {
		t.Fatalf("control: %d server processes under sandbox-run for %d sessions (untested); processes %v", servers, n, before)
	}
	h.stop(t)
	// A PID namespace's init may still be tearing its namespace down when
	// sandbox-run has exited (its memory already gone): give that a
	// second, as the run's own rule (nothing left within a second) does.
	deadline := time.Now().Add(time.Second * sandboxtest.Slowdown)
	for {
		var alive []int
		for _, pid := range before {
			if st := procState(pid); st != "" && st != "Z" {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range alive {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				t.Errorf("process %d (state %s, %q) outlived the listener", pid, procState(pid), strings.ReplaceAll(string(b), "\x00", " "))
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procState is a process's state letter ("Z": exited, not yet reaped by
// its new parent), "" when it is gone.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i > 0 {
		if fs := strings.Fields(s[i+1:]); len(fs) > 0 {
			return fs[0]
		}
	}
	return "?"
}

// descendants lists every process below pid, from /proc.
func descendants(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		line, _ := bufio.NewReader(f).ReadString('\n')
		f.Close()
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		if i := strings.LastIndexByte(line, ')'); i > 0 {
			if fs := strings.Fields(line[i+1:]); len(fs) > 1 {
				parent[p], _ = strconv.Atoi(fs[1])
			}
		}
	}
	var out []int
	for p := range parent {
		for q, depth := parent[p], 0; q > 1 && depth < 256; q, depth = parent[q], depth+1 {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}
