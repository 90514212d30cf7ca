package e2e

// What is judged is what is forwarded (issue 34 items 1 and 2), through
// the binary, against real servers: mcp-go v1.2.1 (internal/mcptest), the
// official Go SDK at v1.2.0 and v1.4.0 (internal/mcptest/testdata), whose
// parsers read member names otherwise than the relay, and the hostile
// server, which runs a tools/call without an id. Control: each message
// sent straight to the servers (`sandbox-run run`) makes at least one of
// them run the denied tool, and each server runs at least one of them.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// nearMisses are calls of write_file that a lenient parser reads as such
// while the relay, before issue 34, judged them as something else (%[1]d
// is the id, %[2]s the path to write).
var nearMisses = []struct{ name, line string }{
	{"ID", `{"jsonrpc":"2.0","ID":%[1]d,"method":"tools/call","params":{"name":"write_file","arguments":{"path":%[2]q,"content":"x"}}}`},
	{"id NUL", `{"jsonrpc":"2.0","id\u0000":%[1]d,"method":"tools/call","params":{"name":"write_file","arguments":{"path":%[2]q,"content":"x"}}}`},
	{"name NUL", `{"jsonrpc":"2.0","id":%[1]d,"method":"tools/call","params":{"name":"echo","name\u0000":"write_file","arguments":{"path":%[2]q,"content":"x"}}}`},
	{"method NUL", `{"jsonrpc":"2.0","id":%[1]d,"method":"ping","method\u0000":"tools/call","params":{"name":"write_file","arguments":{"path":%[2]q,"content":"x"}}}`},
	{"no id", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{"path":%[2]q,"content":"x"}}}`},
}

func TestMCPGateNearMiss(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	// Beside the other test servers: a directory the sandbox's uid can read.
	dir := filepath.Dir(goServer(t))
	servers := [][]string{{goServer(t)}, {goServer(t), mcptest.HostileArg}}
	for _, v := range mcptest.GoSDKVersions {
		servers = append(servers, []string{mcptest.BuildGoSDKServer(t, v, dir)})
	}
	reached := map[string][]string{} // variant -> the servers that ran it
	for si, srv := range servers {
		name := strings.Join(append([]string{filepath.Base(srv[0])}, srv[1:]...), " ")
		args := append([]string{"--workdir", w, "--read", filepath.Dir(srv[0])}, "--")
		ctl := startRaw(t, append(append([]string{"run"}, args...), srv...)...)
		ctl.initialize(`{}`)
		var paths []string
		for i, v := range nearMisses {
			paths = append(paths, filepath.Join(w, fmt.Sprintf("control-%d-%d", si, i)))
			ctl.send(fmt.Sprintf(v.line, 100+i, paths[i]))
		}
		ran := waitFiles(paths)
		any := false
		for i, ok := range ran {
			if ok {
				reached[nearMisses[i].name] = append(reached[nearMisses[i].name], name)
				any = true
			}
		}
		if !any {
			t.Errorf("control: %s ran none of the near misses (untested)", name)
		}

		audit := filepath.Join(t.TempDir(), "audit.jsonl")
		m := startRaw(t, append(append([]string{"mcp", "--deny-tool", "write_file", "--audit", audit}, args...), srv...)...)
		m.initialize(`{}`)
		for i, v := range nearMisses {
			path := filepath.Join(w, fmt.Sprintf("relay-%d-%d", si, i))
			m.send(fmt.Sprintf(v.line, 100+i, path))
			r := m.reply(refusedID(v.name, 100+i), nil)
			if r.Error == nil || r.Error.Code != -32600 {
				t.Errorf("%s, %s: %s, want -32600", name, v.name, r.line)
			}
			if _, err := os.Stat(path); err == nil {
				t.Errorf("%s, %s: the denied tool ran through the relay", name, v.name)
			}
		}
		// Control: an exact call reaches the server through the same relay.
		m.send(`{"jsonrpc":"2.0","id":"echo","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
		if r := m.reply(`"echo"`, nil); r.Error != nil || !strings.Contains(string(r.Result), "hi") {
			t.Errorf("%s: control: echo through the relay: %s", name, r.line)
		}
		m.in.Close()
		m.wait(mcpTimeout)
		refused := 0
		for _, rec := range auditLines(t, audit) {
			if rec["outcome"] == "refused" && strings.HasPrefix(fmt.Sprint(rec["rule"]), "malformed:") {
				refused++
			}
		}
		if refused != len(nearMisses) {
			t.Errorf("%s: %d refusals audited, want %d", name, refused, len(nearMisses))
		}
	}
	for _, v := range nearMisses {
		if len(reached[v.name]) == 0 {
			t.Errorf("control: %s ran on no server (untested)", v.name)
		}
	}
	t.Logf("servers that ran each near miss when sent straight: %v", reached)
}

// refusedID is the id the relay's refusal carries: the message's own
// when it could be read exactly.
func refusedID(variant string, id int) string {
	switch variant {
	case "ID", "id NUL", "no id":
		return "null"
	}
	return fmt.Sprint(id)
}

// waitFiles says which of paths exist, waiting until all do or five
// seconds have passed (servers run calls concurrently, and a call
// without an id has no answer to wait for).
func waitFiles(paths []string) []bool {
	ok := make([]bool, len(paths))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		all := true
		for i, p := range paths {
			if _, err := os.Stat(p); err == nil {
				ok[i] = true
			}
			all = all && ok[i]
		}
		if all || time.Now().After(deadline) {
			return ok
		}
	}
}

// TestMCPHTTPNearMiss: the same near misses over Streamable HTTP
// (`mcp --listen`) in front of the mcp-go server: each POST is refused
// (400, or the refusal as its response when its id could be read), none
// runs the denied tool, and each is audited. Control: the "ID" one, sent
// straight to the same server, runs it; an exact echo passes the relay.
func TestMCPHTTPNearMiss(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	w := sandboxtest.WorkDir(t)
	srv := goServer(t)
	ctl := startRaw(t, "run", "--workdir", w, "--read", filepath.Dir(srv), "--", srv)
	ctl.initialize(`{}`)
	path := filepath.Join(w, "http-control")
	ctl.send(fmt.Sprintf(nearMisses[0].line, 100, path))
	if !waitFiles([]string{path})[0] {
		t.Fatalf("control: %s did not run write_file on the mcp-go server (untested)", nearMisses[0].name)
	}

	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	h := startHTTP(t, w, "--deny-tool", "write_file", "--audit", audit)
	sid := h.initialize()
	hdr := map[string]string{"Mcp-Session-Id": sid}
	for i, v := range nearMisses {
		path := filepath.Join(w, fmt.Sprintf("http-relay-%d", i))
		res, body := h.do("POST", fmt.Sprintf(v.line, 100+i, path), hdr)
		refused := res.StatusCode == 400 || (res.StatusCode == 200 && strings.Contains(body, `"code":-32600`))
		if !refused || !strings.Contains(body, "sandbox-run:") {
			t.Errorf("%s: %d %s, want a refusal", v.name, res.StatusCode, body)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: the denied tool ran through the relay", v.name)
		}
	}
	res, body := h.do("POST", `{"jsonrpc":"2.0","id":"echo","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, hdr)
	if res.StatusCode != 200 || !strings.Contains(body, "hi") {
		t.Fatalf("control: echo through the relay: %d %s", res.StatusCode, body)
	}
	h.do("DELETE", "", hdr)
	deadline := time.Now().Add(mcpTimeout)
	for {
		refused := 0
		for _, rec := range auditLines(t, audit) {
			if rec["outcome"] == "refused" && strings.HasPrefix(fmt.Sprint(rec["rule"]), "malformed:") {
				refused++
			}
		}
		if refused == len(nearMisses) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d refusals audited, want %d", refused, len(nearMisses))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
