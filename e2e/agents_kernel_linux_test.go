package e2e

// sandbox-run wrap and sandbox-run hook with the real agents: Claude
// Code and Codex (installed by scripts/install-agents.sh into
// .cache/agents and .cache/codex), the real npm filesystem server, the
// rewritten commands run through this sandbox-run.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

const agentTimeout = 90 * time.Second * sandboxtest.Slowdown

// agentBinary finds an agent's native binary under the module's .cache.
func agentBinary(t *testing.T, name, glob string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := filepath.Glob(filepath.Join(root, glob))
	if len(m) == 0 {
		sandboxtest.Unavailable(t, name, "run scripts/install-agents.sh (make mcp-deps): no "+glob)
		return ""
	}
	return m[0]
}

func claudeBinary(t *testing.T) string {
	return agentBinary(t, "Claude Code", ".cache/agents/node_modules/@anthropic-ai/claude-code-linux-*/claude")
}

func codexBinary(t *testing.T) string {
	return agentBinary(t, "Codex", ".cache/codex/node_modules/@openai/codex-linux-*/vendor/*/bin/codex")
}

// agentEnv is the whole environment an agent gets: nothing of the test's.
func agentEnv(home string, more ...string) []string {
	return append([]string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1"}, more...)
}

func runAgent(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, name, args...)
	c.Dir, c.Env = dir, env
	c.WaitDelay = 5 * time.Second
	out, err := c.CombinedOutput()
	return string(out), err
}

// filesystemConfig is a workdir holding a config of fmt (a .mcp.json
// text with FS and DIR in it) that starts the real filesystem server.
func filesystemProject(t *testing.T) (workdir string, npm mcptest.NPM) {
	t.Helper()
	npm = mcptest.NPMServers(t)
	return sandboxtest.WorkDir(t), npm
}

// TestWrapClaudeMCPList: a project's .mcp.json wrapped by sandbox-run wrap
// still connects in the real Claude Code (claude mcp list: ✔ Connected),
// and the server it connects to runs through sandbox-run; --undo gives
// the file back byte for byte.
func TestWrapClaudeMCPList(t *testing.T) {
	needBwrap(t)
	claude := claudeBinary(t)
	w, npm := filesystemProject(t)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Project servers need the user's approval; this approves them all.
	if err := os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(`{"enableAllProjectMcpServers": true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(w, ".mcp.json")
	orig := []byte(`{
  "mcpServers": {
    "files": {
      "command": ` + jsonQuote(npm.Node) + `,
      "args": [` + jsonQuote(npm.Filesystem()) + `, ` + jsonQuote(w) + `]
    }
  }
}
`)
	if err := os.WriteFile(cfg, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runBin(t, bin, nil, "", "wrap", cfg)
	if r.code != 0 {
		t.Fatalf("wrap: %d %s", r.code, r.stderr)
	}
	out, err := runAgent(t, w, agentEnv(home), claude, "mcp", "list")
	if err != nil || !strings.Contains(out, "files: "+bin+" mcp --workdir "+w) || !strings.Contains(out, "✔ Connected") {
		t.Fatalf("claude mcp list (%v):\n%s", err, out)
	}
	// The control: the same list with the server's node replaced by one
	// that does not exist fails, so "Connected" above was the server's.
	if r := runBin(t, bin, nil, "", "wrap", "--undo", cfg); r.code != 0 {
		t.Fatalf("undo: %d %s", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(cfg); !bytes.Equal(got, orig) {
		t.Fatalf("undo gave\n%s\nwant\n%s", got, orig)
	}
	broken := bytes.Replace(orig, []byte(jsonQuote(npm.Filesystem())), []byte(jsonQuote(npm.Filesystem()+".missing")), 1)
	if err := os.WriteFile(cfg, broken, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runBin(t, bin, nil, "", "wrap", cfg); r.code != 0 {
		t.Fatalf("wrap: %d %s", r.code, r.stderr)
	}
	if out, _ := runAgent(t, w, agentEnv(home), claude, "mcp", "list"); strings.Contains(out, "✔ Connected") {
		t.Fatalf("control: a server that cannot start shows Connected:\n%s", out)
	}
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestWrapCodexMCPList: Codex reads the config.toml sandbox-run wrap
// wrote (codex mcp get: the command is sandbox-run, args as wrapped, the
// user's comments kept), and the server it would start answers MCP.
func TestWrapCodexMCPList(t *testing.T) {
	needBwrap(t)
	codex := codexBinary(t)
	w, npm := filesystemProject(t)
	codexHome := t.TempDir()
	cfg := filepath.Join(codexHome, "config.toml")
	orig := "# mine\nmodel = \"gpt-5-codex\" # kept\n\n[mcp_servers.files]\ncommand = " + jsonQuote(npm.Node) +
		"  # the node\nargs = [" + jsonQuote(npm.Filesystem()) + ", " + jsonQuote(w) + "]\ncwd = " + jsonQuote(w) + "\n"
	if err := os.WriteFile(cfg, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runBin(t, bin, nil, "", "wrap", cfg); r.code != 0 {
		t.Fatalf("wrap: %d %s", r.code, r.stderr)
	}
	got, _ := os.ReadFile(cfg)
	if !strings.Contains(string(got), "# mine\nmodel = \"gpt-5-codex\" # kept\n") || !strings.Contains(string(got), "  # the node\n") {
		t.Errorf("comments lost:\n%s", got)
	}
	env := agentEnv(t.TempDir(), "CODEX_HOME="+codexHome)
	out, err := runAgent(t, w, env, codex, "mcp", "list")
	if err != nil || !strings.Contains(out, bin) {
		t.Fatalf("codex mcp list (%v):\n%s", err, out)
	}
	out, err = runAgent(t, w, env, codex, "mcp", "get", "files", "--json")
	if err != nil {
		t.Fatalf("codex mcp get: %v\n%s", err, out)
	}
	var got2 struct {
		Transport struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"transport"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &got2); err != nil {
		t.Fatalf("codex mcp get: %v\n%s", err, out)
	}
	if got2.Transport.Command != bin || len(got2.Transport.Args) == 0 || got2.Transport.Args[0] != "mcp" {
		t.Fatalf("codex reads command %q args %q", got2.Transport.Command, got2.Transport.Args)
	}
	// What Codex would start, started: the server answers through the relay.
	s := startMCP(t, got2.Transport.Args)
	if tools := s.tools(t); !tools["read_text_file"] {
		t.Errorf("tools %v", tools)
	}
	if r := runBin(t, bin, nil, "", "wrap", "--undo", cfg); r.code != 0 {
		t.Fatalf("undo: %d %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(cfg); string(b) != orig {
		t.Errorf("undo gave\n%s\nwant\n%s", b, orig)
	}
}

// TestWrapDryRunChangesNothing: --dry-run prints the diff and leaves the
// file and its directory as they were.
func TestWrapDryRunChangesNothing(t *testing.T) {
	d := t.TempDir()
	cfg := filepath.Join(d, ".mcp.json")
	orig := []byte(`{"mcpServers": {"a": {"command": "node", "args": ["/srv/a.js"]}}}` + "\n")
	if err := os.WriteFile(cfg, orig, 0o640); err != nil {
		t.Fatal(err)
	}
	r := runBin(t, bin, nil, "", "wrap", "--dry-run", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, "+{\"mcpServers\": {\"a\": {\"command\": "+jsonQuote(bin)) {
		t.Fatalf("dry run: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got, _ := os.ReadFile(cfg); !bytes.Equal(got, orig) {
		t.Errorf("--dry-run changed the file")
	}
	if ents, _ := os.ReadDir(d); len(ents) != 1 {
		t.Errorf("--dry-run left %v", ents)
	}
	// A second wrap after a real one changes nothing and says so.
	if r := runBin(t, bin, nil, "", "wrap", cfg); r.code != 0 {
		t.Fatal(r.stderr)
	}
	wrapped, _ := os.ReadFile(cfg)
	r = runBin(t, bin, nil, "", "wrap", cfg)
	if got, _ := os.ReadFile(cfg); r.code != 0 || !bytes.Equal(got, wrapped) || !strings.Contains(r.stderr, "nothing to change") {
		t.Errorf("second wrap: %d %s", r.code, r.stderr)
	}
}
