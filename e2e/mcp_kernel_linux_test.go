package e2e

// MCP servers nobody here wrote (@modelcontextprotocol/server-filesystem
// and server-everything, from npm) and the mcp-go test server, driven by
// mcp-go's client through `sandbox-run run` (transparent wrapping) and
// through `sandbox-run mcp` (the relay).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// mcpTimeout bounds every MCP test, server start included (the client
// here runs under the race detector in `make test-race`).
const mcpTimeout = 20 * time.Second * sandboxtest.Slowdown

var (
	goServerOnce sync.Once
	goServerPath string
	goServerErr  error
)

// goServer builds the mcptest server next to the sandbox-run binary, in a
// directory a sandbox can be given with --read.
func goServer(t *testing.T) string {
	t.Helper()
	goServerOnce.Do(func() {
		goServerPath = filepath.Join(filepath.Dir(bin), "mcptest-server")
		out, err := exec.Command("go", "build", "-o", goServerPath, "../internal/mcptest/server").CombinedOutput()
		if err != nil {
			goServerErr = fmt.Errorf("building the mcptest server: %v\n%s", err, out)
		}
	})
	if goServerErr != nil {
		t.Fatal(goServerErr)
	}
	return goServerPath
}

// lockedBuffer collects a child's output, readable while the child runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// mcpSession is an mcp-go client talking to a server started by sandbox-run.
type mcpSession struct {
	c      *client.Client
	cmd    *exec.Cmd
	stderr *lockedBuffer
	init   *mcp.InitializeResult
	ctx    context.Context
	closed bool

	mu       sync.Mutex
	progress []float64
	logs     int
}

// startMCP runs sandbox-run with args as a stdio MCP server and initializes
// a client on it. The session is closed when the test ends.
func startMCP(t *testing.T, args []string, opts ...client.ClientOption) *mcpSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mcpTimeout)
	t.Cleanup(cancel)
	s := &mcpSession{stderr: &lockedBuffer{}, ctx: ctx}
	tr := transport.NewStdioWithOptions(bin, nil, args,
		transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
			s.cmd = exec.CommandContext(ctx, command, args...)
			s.cmd.Env = append(os.Environ(), "SANDBOX_RUN_TEST_CANARY=host-secret")
			s.cmd.Stderr = s.stderr
			return s.cmd, nil
		}))
	s.c = client.NewClient(tr, opts...)
	if err := s.c.Start(ctx); err != nil {
		t.Fatalf("starting sandbox-run: %v", err)
	}
	t.Cleanup(func() { s.close() })
	s.c.OnNotification(func(n mcp.JSONRPCNotification) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch n.Method {
		case string(mcp.MethodNotificationProgress):
			if p, ok := n.Params.AdditionalFields["progress"].(float64); ok {
				s.progress = append(s.progress, p)
			}
		case string(mcp.MethodNotificationMessage):
			s.logs++
		}
	})
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "sandbox-run-e2e", Version: "1"}
	res, err := s.c.Initialize(ctx, req)
	if err != nil {
		t.Fatalf("initialize: %v; sandbox-run stderr:\n%s", err, s.stderr)
	}
	s.init = res
	return s
}

// close ends the session and returns sandbox-run's exit status.
func (s *mcpSession) close() int {
	if !s.closed {
		s.closed = true
		s.c.Close()
	}
	if s.cmd == nil || s.cmd.ProcessState == nil {
		return -1
	}
	return s.cmd.ProcessState.ExitCode()
}

func (s *mcpSession) tools(t *testing.T) map[string]bool {
	t.Helper()
	res, err := s.c.ListTools(s.ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v; stderr:\n%s", err, s.stderr)
	}
	out := map[string]bool{}
	for _, tl := range res.Tools {
		out[tl.Name] = true
	}
	return out
}

func (s *mcpSession) call(t *testing.T, name string, args map[string]any) (*mcp.CallToolResult, error) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return s.c.CallTool(s.ctx, req)
}

// callText calls a tool that must succeed and returns its text.
func (s *mcpSession) callText(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	res, err := s.call(t, name, args)
	if err != nil {
		t.Fatalf("%s: %v; stderr:\n%s", name, err, s.stderr)
	}
	if res.IsError {
		t.Fatalf("%s: tool error %q", name, resultText(res))
	}
	return resultText(res)
}

// callFails calls a tool that must fail (a tool error or a JSON-RPC error)
// and returns what it said.
func (s *mcpSession) callFails(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	res, err := s.call(t, name, args)
	if err != nil {
		return err.Error()
	}
	if !res.IsError {
		t.Fatalf("%s succeeded with %q, want an error", name, resultText(res))
	}
	return resultText(res)
}

// callProgress calls a tool with a progress token and waits for n
// progress notifications.
func (s *mcpSession) callProgress(t *testing.T, name string, args map[string]any, n int) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	req.Params.Meta = &mcp.Meta{ProgressToken: "e2e-progress"}
	res, err := s.c.CallTool(s.ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %v", name, err, res)
	}
	// A server may queue notifications apart from results: allow them a
	// moment to follow.
	deadline := time.Now().Add(3 * time.Second)
	for {
		s.mu.Lock()
		got := append([]float64(nil), s.progress...)
		s.mu.Unlock()
		if len(got) >= n {
			for i, p := range got[:n] {
				if p != float64(i+1) {
					t.Fatalf("progress %v, want 1..%d", got, n)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d progress notifications %v, want %d", len(got), got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mcpModes are the two ways a harness starts a server under sandbox-run.
var mcpModes = []string{"run", "mcp"}

// layout is a workdir with a flag file beside it: parent/work is the
// workdir, parent/flag the file the server must not read. The server is
// given parent as its root, so only the sandbox stands between it and the
// flag.
type layout struct {
	parent, work, flag string
}

func newLayout(t *testing.T) layout {
	t.Helper()
	parent := sandboxtest.WorkDir(t)
	l := layout{parent: parent, work: filepath.Join(parent, "work"), flag: filepath.Join(parent, "flag")}
	if err := os.Mkdir(l.work, 0o755); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Chown(t, l.work)
	if err := os.WriteFile(l.flag, []byte("FLAG-"+token(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestMCPFilesystemServer(t *testing.T) {
	needBwrap(t)
	npm := mcptest.NPMServers(t)
	t.Parallel()
	l := newLayout(t)
	flag, _ := os.ReadFile(l.flag)
	server := []string{npm.Node, npm.Filesystem(), l.parent}

	// Positive control: the same server, unconfined, reads the flag.
	ctl := startMCP(t, append([]string{"run", "--sandbox", "off", "--workdir", l.work, "--"}, server...))
	if got := ctl.callText(t, "read_text_file", map[string]any{"path": l.flag}); got != string(flag) {
		t.Fatalf("positive control read %q, want the flag (untested)", got)
	}
	ctl.close()

	for _, mode := range mcpModes {
		t.Run(mode, func(t *testing.T) { filesystemServerCase(t, l, npm.Dir, server, string(flag), mode) })
	}
}

// TestMCPFilesystemServerGvisor: the same server and attempts under tier
// 2 (--sandbox gvisor), through both ways of starting it. The positive
// control is TestMCPFilesystemServer's, repeated here.
func TestMCPFilesystemServerGvisor(t *testing.T) {
	sandboxtest.Runsc(t)
	npm := mcptest.NPMServers(t)
	l := newLayout(t)
	flag, _ := os.ReadFile(l.flag)
	server := []string{npm.Node, npm.Filesystem(), l.parent}
	ctl := startMCP(t, append([]string{"run", "--sandbox", "off", "--workdir", l.work, "--"}, server...))
	if got := ctl.callText(t, "read_text_file", map[string]any{"path": l.flag}); got != string(flag) {
		t.Fatalf("positive control read %q, want the flag (untested)", got)
	}
	ctl.close()
	for _, mode := range mcpModes {
		t.Run(mode, func(t *testing.T) {
			filesystemServerCase(t, l, npm.Dir, server, string(flag), mode, "--sandbox", "gvisor")
		})
	}
}

// filesystemServerCase drives server-filesystem under `sandbox-run mode`
// with extra flags: tools listed, a write that reaches the workdir, the
// flag beside it unread, a write beside it kept off the host.
func filesystemServerCase(t *testing.T, l layout, npmDir string, server []string, flag, mode string, extra ...string) {
	t.Helper()
	args := append(append([]string{mode, "--workdir", l.work, "--read", npmDir}, extra...), "--")
	s := startMCP(t, append(args, server...))
	if s.init.ServerInfo.Name != "secure-filesystem-server" {
		t.Errorf("server %q", s.init.ServerInfo.Name)
	}
	tools := s.tools(t)
	for _, want := range []string{"read_text_file", "write_file", "list_directory"} {
		if !tools[want] {
			t.Errorf("tools/list lacks %s", want)
		}
	}
	note := filepath.Join(l.work, "note-"+mode+".txt")
	s.callText(t, "write_file", map[string]any{"path": note, "content": "written by " + mode})
	if b, err := os.ReadFile(note); err != nil || string(b) != "written by "+mode {
		t.Fatalf("write did not reach the workdir: %q %v", b, err)
	}
	if got := s.callText(t, "read_text_file", map[string]any{"path": note}); got != "written by "+mode {
		t.Errorf("read back %q", got)
	}
	if got := s.callText(t, "list_directory", map[string]any{"path": l.work}); !strings.Contains(got, filepath.Base(note)) {
		t.Errorf("list_directory %q lacks the note", got)
	}
	msg := s.callFails(t, "read_text_file", map[string]any{"path": l.flag})
	if strings.Contains(msg, flag) {
		t.Fatalf("the sandboxed server read the flag: %q", msg)
	}
	// Beside the workdir is the sandbox's private /tmp: a write may
	// succeed there, but never reaches the host.
	s.call(t, "write_file", map[string]any{"path": filepath.Join(l.parent, "planted"), "content": "x"})
	if _, err := os.Stat(filepath.Join(l.parent, "planted")); err == nil {
		t.Fatal("the sandboxed server wrote beside the workdir on the host")
	}
	if code := s.close(); code != 0 {
		t.Errorf("sandbox-run %s exited %d after the client closed; stderr:\n%s", mode, code, s.stderr)
	}
}

func TestMCPEverythingServer(t *testing.T) {
	needBwrap(t)
	npm := mcptest.NPMServers(t)
	t.Parallel()
	for _, mode := range mcpModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			w := sandboxtest.WorkDir(t)
			s := startMCP(t, []string{mode, "--workdir", w, "--read", npm.Dir, "--", npm.Node, npm.Everything(), "stdio"})
			tools := s.tools(t)
			for _, want := range []string{"echo", "get-sum", "trigger-long-running-operation", "get-env"} {
				if !tools[want] {
					t.Errorf("tools/list lacks %s: %v", want, tools)
				}
			}
			if got := s.callText(t, "echo", map[string]any{"message": "hi"}); !strings.Contains(got, "hi") {
				t.Errorf("echo: %q", got)
			}
			if got := s.callText(t, "get-sum", map[string]any{"a": 2, "b": 3}); !strings.Contains(got, "5") {
				t.Errorf("get-sum: %q", got)
			}

			res, err := s.c.ListResources(s.ctx, mcp.ListResourcesRequest{})
			if err != nil || len(res.Resources) == 0 {
				t.Fatalf("resources/list: %v %+v", err, res)
			}
			rr, err := s.c.ReadResource(s.ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: res.Resources[0].URI}})
			if err != nil || len(rr.Contents) == 0 {
				t.Fatalf("resources/read %s: %v %+v", res.Resources[0].URI, err, rr)
			}
			prompts, err := s.c.ListPrompts(s.ctx, mcp.ListPromptsRequest{})
			if err != nil || len(prompts.Prompts) == 0 {
				t.Fatalf("prompts/list: %v %+v", err, prompts)
			}
			pr, err := s.c.GetPrompt(s.ctx, mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: "simple-prompt"}})
			if err != nil || len(pr.Messages) == 0 {
				t.Fatalf("prompts/get simple-prompt: %v %+v", err, pr)
			}

			s.callProgress(t, "trigger-long-running-operation", map[string]any{"duration": 0.3, "steps": 3}, 3)

			// Nothing of the harness's environment reaches the server.
			env := s.callText(t, "get-env", map[string]any{})
			if strings.Contains(env, "SANDBOX_RUN_TEST_CANARY") || strings.Contains(env, "host-secret") {
				t.Errorf("the host environment leaked into the server: %s", env)
			}
		})
	}
}

func TestMCPGoServer(t *testing.T) {
	needBwrap(t)
	srv := goServer(t)
	t.Parallel()
	l := newLayout(t)
	flag, _ := os.ReadFile(l.flag)

	// Positive control: the same server, unconfined, reads the flag.
	ctl := startMCP(t, []string{"run", "--sandbox", "off", "--workdir", l.work, "--", srv})
	if got := ctl.callText(t, "read_file", map[string]any{"path": l.flag}); got != string(flag) {
		t.Fatalf("positive control read %q, want the flag (untested)", got)
	}
	ctl.close()

	for _, mode := range mcpModes {
		for _, style := range []struct {
			name string
			opts []client.ClientOption
		}{
			{"stateless", nil},
			{"initialize", []client.ClientOption{client.WithProtocolVersion(mcp.ProtocolVersion20251125)}},
		} {
			t.Run(mode+"/"+style.name, func(t *testing.T) {
				s := startMCP(t, []string{mode, "--workdir", l.work, "--read", filepath.Dir(srv), "--", srv}, style.opts...)
				if modern := mcp.IsModernProtocol(s.c.ProtocolVersion()); modern != (style.name == "stateless") {
					t.Fatalf("negotiated %q", s.c.ProtocolVersion())
				}
				if s.init.ServerInfo.Name != mcptest.ServerName {
					t.Errorf("server %q", s.init.ServerInfo.Name)
				}
				if tools := s.tools(t); !tools["echo"] || !tools["read_file"] || !tools["progress"] {
					t.Errorf("tools/list: %v", tools)
				}
				if got := s.callText(t, "echo", map[string]any{"text": "hello"}); got != "hello" {
					t.Errorf("echo %q", got)
				}
				note := filepath.Join(l.work, "go-"+mode+"-"+style.name)
				s.callText(t, "write_file", map[string]any{"path": note, "content": "x"})
				if got := s.callText(t, "read_file", map[string]any{"path": note}); got != "x" {
					t.Errorf("read back %q", got)
				}
				if msg := s.callFails(t, "read_file", map[string]any{"path": l.flag}); strings.Contains(msg, string(flag)) {
					t.Fatalf("read the flag: %q", msg)
				}
				rr, err := s.c.ReadResource(s.ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: mcptest.ResourceURI}})
				if err != nil || len(rr.Contents) != 1 || rr.Contents[0].(mcp.TextResourceContents).Text != mcptest.ResourceText {
					t.Errorf("resources/read: %v %+v", err, rr)
				}
				pr, err := s.c.GetPrompt(s.ctx, mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: mcptest.PromptName, Arguments: map[string]string{"name": "Ada"}}})
				if err != nil || len(pr.Messages) != 1 {
					t.Errorf("prompts/get: %v %+v", err, pr)
				}
				s.callProgress(t, "progress", map[string]any{"steps": 3, "delay_ms": 5}, 3)
				if code := s.close(); code != 0 {
					t.Errorf("exit %d after the client closed; stderr:\n%s", code, s.stderr)
				}
			})
		}
	}
}

// auditLines reads the relay's audit records.
func auditLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestMCPRelayRules(t *testing.T) {
	needBwrap(t)
	npm := mcptest.NPMServers(t)
	t.Parallel()
	l := newLayout(t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	s := startMCP(t, []string{"mcp", "--workdir", l.work, "--read", npm.Dir,
		"--allow-tool", "read_*", "--allow-tool", "list_*", "--deny-tool", "read_media_file",
		"--audit", audit, "--audit-args", "--name", "fs-under-test",
		"--", npm.Node, npm.Filesystem(), l.parent})
	tools := s.tools(t)
	for _, want := range []string{"read_text_file", "list_directory"} {
		if !tools[want] {
			t.Errorf("allowed tool %s hidden: %v", want, tools)
		}
	}
	for _, hidden := range []string{"write_file", "read_media_file", "move_file"} {
		if tools[hidden] {
			t.Errorf("hidden tool %s listed", hidden)
		}
	}
	planted := filepath.Join(l.work, "planted")
	for tool, rule := range map[string]string{"write_file": "--allow-tool", "read_media_file": `--deny-tool "read_media_file"`} {
		msg := s.callFails(t, tool, map[string]any{"path": planted, "content": "x"})
		if !strings.Contains(msg, rule) {
			t.Errorf("%s refused with %q, want the rule %s named", tool, msg, rule)
		}
	}
	if _, err := os.Stat(planted); err == nil {
		t.Fatal("a refused write_file reached the server")
	}
	s.callText(t, "list_directory", map[string]any{"path": l.work})
	if code := s.close(); code != 0 {
		t.Errorf("exit %d; stderr:\n%s", code, s.stderr)
	}

	var calls []string
	runID, sandboxRunID, linked := "", "", ""
	for _, rec := range auditLines(t, audit) {
		ev, _ := rec["event"].(string)
		if !strings.HasPrefix(ev, "mcp_") {
			// The sandbox's own records (run_start, egress, run_end).
			sandboxRunID, _ = rec["run_id"].(string)
			continue
		}
		if runID == "" {
			runID, _ = rec["run_id"].(string)
		}
		if rec["run_id"] != runID || runID == "" {
			t.Errorf("relay record without the session's run id: %v", rec)
		}
		if ev == "mcp_end" {
			linked, _ = rec["sandbox_run_id"].(string)
		}
		if ev == "mcp_start" && (rec["name"] != "fs-under-test" || rec["server"] != npm.Node) {
			t.Errorf("mcp_start names server %v, label %v; want %s and fs-under-test", rec["server"], rec["name"], npm.Node)
		}
		if ev != "mcp_call" {
			continue
		}
		calls = append(calls, fmt.Sprint(rec["tool"], ":", rec["outcome"]))
		for _, k := range []string{"time", "arg_bytes", "duration_ms", "args"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("call record lacks %s: %v", k, rec)
			}
		}
	}
	if linked == "" || linked != sandboxRunID {
		t.Errorf("mcp_end names sandbox run %q, the sandbox's records %q", linked, sandboxRunID)
	}
	if got := strings.Join(calls, " "); !strings.Contains(got, "write_file:refused") ||
		!strings.Contains(got, "read_media_file:refused") || !strings.Contains(got, "list_directory:ok") {
		t.Errorf("audit calls %s", got)
	}
}

func TestMCPRelayServerCrash(t *testing.T) {
	needBwrap(t)
	srv := goServer(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	s := startMCP(t, []string{"mcp", "--workdir", w, "--read", filepath.Dir(srv), "--", srv})
	s.callText(t, "echo", map[string]any{"text": "alive"})
	msg := s.callFails(t, "crash", map[string]any{"code": 3})
	if !strings.Contains(msg, "ended before answering") {
		t.Errorf("pending call got %q, want the relay's error", msg)
	}
	if code := s.close(); code != 3 {
		t.Errorf("relay exited %d after the server crashed with 3, want 3", code)
	}
	if !strings.Contains(s.stderr.String(), "mcptest: crashing with status 3") {
		t.Errorf("the server's stderr did not pass through: %q", s.stderr)
	}
}

// TestMCPRelayFlood: a server flooding stdout is relayed in full while the
// relay's memory stays bounded.
func TestMCPRelayFlood(t *testing.T) {
	needBwrap(t)
	srv := goServer(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	s := startMCP(t, []string{"mcp", "--workdir", w, "--read", filepath.Dir(srv), "--", srv})
	const count, size = 16000, 4096 // 62.5 MiB of notifications
	s.callText(t, "flood", map[string]any{"count": count, "size": size})
	deadline := time.Now().Add(5 * time.Second * sandboxtest.Slowdown)
	for {
		s.mu.Lock()
		n := s.logs
		s.mu.Unlock()
		if n == count {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client got %d of %d notifications", n, count)
		}
		time.Sleep(10 * time.Millisecond)
	}
	hwm := vmHWM(t, s.cmd.Process.Pid)
	t.Logf("relay peak RSS %d MiB after relaying %d MiB", hwm>>20, count*size>>20)
	if hwm > 40<<20 {
		t.Errorf("relay peak RSS %d MiB while relaying %d MiB, want it bounded under 40 MiB", hwm>>20, count*size>>20)
	}
}

// vmHWM is a process's peak resident set size, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// hostIP is an address of this machine other than loopback, which the
// egress proxy may reach when --allow-host names it.
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	sandboxtest.Unavailable(t, "a non-loopback IPv4 address", "give the machine a network interface")
	return ""
}

// TestMCPNetwork: a sandboxed server has no network unless --allow-host
// names the destination, through both run and mcp.
func TestMCPNetwork(t *testing.T) {
	needBwrap(t)
	srv := goServer(t)
	t.Parallel()
	ip := hostIP(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	secret := "NET-" + token(t)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, secret) })}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	target := ln.Addr().String()
	url := "http://" + target + "/"
	w := sandboxtest.WorkDir(t)

	// Positive control: unconfined, the server reaches the target.
	ctl := startMCP(t, []string{"run", "--sandbox", "off", "--workdir", w, "--", srv})
	if got := ctl.callText(t, "fetch", map[string]any{"url": url}); got != secret {
		t.Fatalf("positive control fetched %q (untested)", got)
	}
	ctl.close()

	for _, mode := range mcpModes {
		t.Run(mode+"/none", func(t *testing.T) {
			s := startMCP(t, []string{mode, "--workdir", w, "--read", filepath.Dir(srv), "--", srv})
			if msg := s.callFails(t, "fetch", map[string]any{"url": url}); strings.Contains(msg, secret) {
				t.Fatalf("fetched without --allow-host: %q", msg)
			}
		})
		t.Run(mode+"/allowed", func(t *testing.T) {
			flags := []string{mode, "--workdir", w, "--read", filepath.Dir(srv), "--allow-host", target, "--"}
			s := startMCP(t, append(flags, srv))
			if got := s.callText(t, "fetch", map[string]any{"url": url}); got != secret {
				t.Fatalf("fetch through the allowed proxy: %q", got)
			}
		})
	}
}

// TestMCPRelayLifecycle: a server that ignores the client's leaving is
// ended after the grace; a server that cannot start is a one-line refusal.
func TestMCPRelayLifecycle(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	start := time.Now()
	r := run(t, "", "mcp", "--workdir", w, "--", "sh", "-c", "trap '' TERM; sleep 60")
	if r.code != 0 || time.Since(start) > 15*time.Second {
		t.Errorf("lingering server: exit %d after %s, want 0 within the grace; stderr %q", r.code, time.Since(start), r.stderr)
	}
	r = run(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n", "mcp", "--workdir", w, "--", "/nonexistent/server")
	if r.code != 127 || !strings.Contains(r.stderr, "/nonexistent/server") {
		t.Errorf("missing server: exit %d, stderr %q; want 127 naming it", r.code, r.stderr)
	}
}
