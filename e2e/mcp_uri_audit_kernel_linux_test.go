package e2e

// Resource URIs judged as servers read them, and an audit that loses no
// call (issue 34, items 3 and 4), through the binary.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestMCPGateResourceURIs: server-everything (the TypeScript SDK) looks a
// resource up by `new URL(uri)`, so other spellings of a denied URI (scheme
// case, dot segments, '%2e%2e', whitespace, a tab) read it, and so do dot
// segments that climb out of an allowed prefix. The control shows each
// reads the document with nothing between (`run`); through the relay,
// --deny-resource and --allow-resource refuse every one, with an audit
// record of the canonical URI and the one sent, while the URIs the rules
// leave visible are still read.
func TestMCPGateResourceURIs(t *testing.T) {
	needBwrap(t)
	npm := mcptest.NPMServers(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	const doc = "demo://resource/static/document/architecture.md"
	const docText = "Everything Server"
	denyBypasses := []string{
		"DEMO://resource/static/document/architecture.md",
		"demo://resource/static/x/../document/architecture.md",
		"demo://resource/static/document/%2e%2e/document/architecture.md",
		"demo://resource/static/document/./architecture.md",
		" demo://resource/static/document/architecture.md",
		"demo://resource/static/docu\tment/architecture.md",
	}
	allowEscapes := []string{
		"demo://resource/dynamic/../static/document/architecture.md",
		"demo://resource/dynamic/%2E%2E/static/document/architecture.md",
		"demo://resource/dynamic/text/.%2e/../static/document/architecture.md",
	}
	start := func(audit string, flags ...string) *rawMCP {
		mode := "mcp"
		if audit == "" {
			mode = "run"
		} else {
			flags = append(flags, "--audit", audit)
		}
		args := append([]string{mode, "--workdir", w, "--read", npm.Dir}, flags...)
		m := startRaw(t, append(args, "--", npm.Node, npm.Everything(), "stdio")...)
		m.initialize(`{}`)
		return m
	}
	read := func(m *rawMCP, id int, uri string) rpcMsg {
		q, _ := json.Marshal(uri)
		m.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"resources/read","params":{"uri":` + string(q) + `}}`)
		return m.reply(strconv.Itoa(id), nil)
	}
	// Control: every spelling reads the document straight from the server.
	ctl := start("")
	for i, uri := range append(append([]string{doc}, denyBypasses...), allowEscapes...) {
		if r := read(ctl, i+1, uri); !strings.Contains(string(r.Result), docText) {
			t.Fatalf("control: %q does not read the document directly (untested): %s", uri, r.line)
		}
	}
	for _, tc := range []struct {
		flag, pattern string
		uris          []string
		visible       string
	}{
		{"--deny-resource", doc, append([]string{doc}, denyBypasses...), "demo://resource/static/document/features.md"},
		{"--allow-resource", "demo://resource/dynamic/*", allowEscapes, "demo://resource/dynamic/text/1"},
	} {
		audit := filepath.Join(t.TempDir(), "audit.jsonl")
		m := start(audit, tc.flag, tc.pattern)
		for i, uri := range tc.uris {
			r := read(m, i+1, uri)
			if r.Error == nil || !strings.Contains(r.Error.Message, "sandbox-run:") {
				t.Errorf("%s %s: %q not refused by the relay: %s", tc.flag, tc.pattern, uri, r.line)
			}
		}
		if r := read(m, 100, tc.visible); !strings.Contains(string(r.Result), "contents") {
			t.Errorf("%s %s: %s, visible, not read: %s", tc.flag, tc.pattern, tc.visible, r.line)
		}
		m.in.Close()
		m.wait(mcpTimeout)
		b, _ := os.ReadFile(audit)
		refused := 0
		for _, l := range strings.Split(string(b), "\n") {
			var rec struct{ Event, URI, URISent, Outcome string }
			if json.Unmarshal([]byte(l), &rec) == nil && rec.Outcome == "refused" && rec.URI == doc {
				refused++
			}
		}
		if refused != len(tc.uris) {
			t.Errorf("%s: %d refusals of %s audited, want %d:\n%s", tc.flag, refused, doc, len(tc.uris), b)
		}
	}
}

// TestMCPAuditCallStartSurvivesSIGKILL: a tools/call whose server never
// answers, the relay killed with SIGKILL once the server has the call (its
// marker file exists): the audit holds the call's mcp_call_start. The
// control is the missing mcp_call for it (the call never ended, so the
// start record is what survived), beside an echo call made first whose
// mcp_call is there (ended calls are recorded in that file).
func TestMCPAuditCallStartSurvivesSIGKILL(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	marker := filepath.Join(w, "call-received")
	m := startRaw(t, hostileArgs(t, "mcp", w, "--audit", audit)...)
	m.initialize(`{}`)
	m.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"first"}}}`)
	if r := m.reply("1", nil); r.Error != nil {
		t.Fatalf("echo: %s", r.line)
	}
	q, _ := json.Marshal(marker)
	m.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block","arguments":{"path":` + string(q) + `}}}`)
	waitForFile(t, marker, mcpTimeout)
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m.wait(mcpTimeout)
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	var starts, ends []string
	for _, l := range strings.Split(string(b), "\n") {
		var rec struct{ Event, Tool string }
		if json.Unmarshal([]byte(l), &rec) != nil {
			continue
		}
		switch rec.Event {
		case "mcp_call_start":
			starts = append(starts, rec.Tool)
		case "mcp_call":
			ends = append(ends, rec.Tool)
		}
	}
	if strings.Join(ends, ",") != "echo" {
		t.Fatalf("control: ended calls recorded %v, want [echo] (untested):\n%s", ends, b)
	}
	if strings.Join(starts, ",") != "echo,block" {
		t.Errorf("start records %v, want [echo block]:\n%s", starts, b)
	}
}

// waitForFile waits until path exists, at most within.
func waitForFile(t *testing.T, path string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Lstat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", path, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
