package wrap

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const sbx = "/opt/sandbox-run/bin/sandbox-run"

// clientCase is one client's config in testdata and what wrap must do
// with each of its servers: the args it must get ("" = left alone).
type clientCase struct {
	file   string
	format Format
	want   map[string]string // server (scope/name) -> substring of its new args, joined by " "
}

var clients = []clientCase{
	{"claude-project/.mcp.json", ClaudeProject, map[string]string{
		"filesystem":    "mcp --workdir TESTDATA/claude-project --allow-host registry.npmjs.org --cache npm -- npx -y @modelcontextprotocol/server-filesystem .",
		"github":        "mcp --workdir TESTDATA/claude-project --allow-host pypi.org --allow-host files.pythonhosted.org --cache uv --pass-env GITHUB_TOKEN -- uvx mcp-server-git --repository .",
		"local":         "mcp --workdir TESTDATA/claude-project --pass-env API_KEY -- node",
		"docs":          "",
		"containerised": "",
	}},
	{"claude-user/.claude.json", ClaudeUser, map[string]string{
		"memory":                     "mcp --allow-host registry.npmjs.org --cache npm -- npx -y @modelcontextprotocol/server-memory",
		"project /home/me/app/tools": "mcp --workdir /home/me/app --allow-host proxy.golang.org --allow-host sum.golang.org --cache go --pass-env GOFLAGS -- go run ./cmd/mcp",
	}},
	{"codex/config.toml", Codex, map[string]string{
		"filesystem": "mcp --workdir /home/me/src --allow-host registry.npmjs.org --cache npm -- npx -y @modelcontextprotocol/server-filesystem /home/me/src",
		"git-tools":  "mcp --allow-host pypi.org --allow-host files.pythonhosted.org --cache uv --pass-env GIT_AUTHOR_NAME --pass-env GIT_TOKEN --pass-env SSH_AUTH_SOCK -- uvx mcp-server-git",
		"plain":      "mcp --pass-env PLAIN_MODE -- /usr/local/bin/my-server",
		"remote":     "",
	}},
	{"vscode/.vscode/mcp.json", VSCode, map[string]string{
		"fetch":  "mcp --workdir TESTDATA/vscode --allow-host pypi.org --allow-host files.pythonhosted.org --cache uv -- uvx mcp-server-fetch",
		"files":  "mcp --workdir ${workspaceFolder}/tools --pass-env TOKEN -- node ${workspaceFolder}/server.js",
		"remote": "",
	}},
	{"cursor/.cursor/mcp.json", Cursor, map[string]string{
		"linear": "mcp --workdir TESTDATA/cursor --allow-host registry.npmjs.org --cache npm -- npx -y mcp-remote https://mcp.linear.app/sse",
		"sqlite": "mcp --workdir TESTDATA/cursor --allow-host pypi.org --allow-host files.pythonhosted.org --cache uv --pass-env LOG_LEVEL -- uvx mcp-server-sqlite --db-path data/app.db",
		"web":    "",
	}},
	{"desktop/claude_desktop_config.json", ClaudeDesktop, map[string]string{
		"filesystem": "mcp --allow-host registry.npmjs.org --cache npm -- npx -y @modelcontextprotocol/server-filesystem /Users/me/Desktop /Users/me/Downloads",
		"notes":      "mcp --read /opt/mcp -- node --no-warnings /opt/mcp/node_modules/notes-mcp/dist/index.js --dir /Users/me/Notes",
		"weather":    "mcp --allow-host pypi.org --allow-host files.pythonhosted.org --cache pip -- pipx run weather-mcp",
	}},
	{"gemini/.gemini/settings.json", Gemini, map[string]string{
		"pythonTools": "mcp --workdir TESTDATA/gemini/mcp-servers/python --pass-env API_KEY --pass-env DATABASE_URL -- python -m my_mcp_server --port 8080",
		"httpServer":  "",
	}},
}

func testdataDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func key(o Outcome) string {
	if o.Server.Scope != "" {
		return o.Server.Scope + "/" + o.Server.Name
	}
	return o.Server.Name
}

// TestRewriteClients rewrites each client's config: every server gets
// the args its launcher needs or is left alone, the output matches its
// golden file, the diff applied by patch(1) gives the same bytes, and a
// second rewrite changes nothing.
func TestRewriteClients(t *testing.T) {
	td := testdataDir(t)
	for _, c := range clients {
		t.Run(string(c.format), func(t *testing.T) {
			path := filepath.Join(td, c.file)
			old, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Rewrite(path, old, Options{SandboxRun: sbx, Home: "/home/me"})
			if err != nil {
				t.Fatal(err)
			}
			if p.Format != c.format {
				t.Errorf("format %s, want %s", p.Format, c.format)
			}
			checkOutcomes(t, p, c, td)
			golden(t, path+".golden", bytes.ReplaceAll(p.New, []byte(td), []byte("TESTDATA")))
			checkPatch(t, p, old)
			again, err := Rewrite(path, p.New, Options{SandboxRun: sbx, Home: "/home/me"})
			if err != nil {
				t.Fatal(err)
			}
			if again.Changed() || !bytes.Equal(again.New, p.New) {
				t.Errorf("a second wrap changed the file:\n%s", again.Diff(c.file))
			}
		})
	}
}

func checkOutcomes(t *testing.T, p *Plan, c clientCase, td string) {
	t.Helper()
	seen := map[string]bool{}
	for _, o := range p.Outcomes {
		k := key(o)
		seen[k] = true
		want, ok := c.want[k]
		if !ok {
			if o.Wrapped {
				t.Errorf("%s wrapped, not in the table", k)
			}
			continue
		}
		want = strings.ReplaceAll(want, "TESTDATA", td)
		switch {
		case want == "" && o.Wrapped:
			t.Errorf("%s wrapped (%q), want it left alone", k, o.Args)
		case want == "" && o.Note == "":
			t.Errorf("%s left alone without a note", k)
		case want != "" && !o.Wrapped:
			t.Errorf("%s left alone (%s), want %q", k, o.Note, want)
		case want != "" && (o.Command != sbx || strings.Join(o.Args, " ") != want):
			t.Errorf("%s: %s %q\nwant %s %q", k, o.Command, strings.Join(o.Args, " "), sbx, want)
		}
	}
	for k := range c.want {
		if !seen[k] {
			t.Errorf("server %s not found", k)
		}
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s:\n%s", path, got)
	}
}

// checkPatch applies the plan's diff to the old bytes with patch(1).
func checkPatch(t *testing.T, p *Plan, old []byte) {
	t.Helper()
	if _, err := exec.LookPath("patch"); err != nil {
		t.Log("patch(1) not installed: the diff is checked against the golden output only")
		return
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "config")
	if err := os.WriteFile(f, old, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("patch", "-s", f)
	cmd.Stdin = strings.NewReader(p.Diff("config"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("patch: %v\n%s\ndiff:\n%s", err, out, p.Diff("config"))
	}
	got, _ := os.ReadFile(f)
	if !bytes.Equal(got, p.New) {
		t.Errorf("the diff applied gives\n%s\nwant\n%s", got, p.New)
	}
}

// TestServerPicksOne: --server rewrites that server alone; a name the
// file lacks, or a server that cannot be wrapped, is an error.
func TestServerPicksOne(t *testing.T) {
	td := testdataDir(t)
	path := filepath.Join(td, "claude-project/.mcp.json")
	old, _ := os.ReadFile(path)
	p, err := Rewrite(path, old, Options{SandboxRun: sbx, Server: "local"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Outcomes) != 1 || !p.Outcomes[0].Wrapped || p.Outcomes[0].Server.Name != "local" {
		t.Fatalf("outcomes %+v, want local wrapped alone", p.Outcomes)
	}
	if n := bytes.Count(p.New, []byte(sbx)); n != 1 {
		t.Errorf("%d servers run sandbox-run, want 1", n)
	}
	if _, err := Rewrite(path, old, Options{SandboxRun: sbx, Server: "nope"}); !errors.Is(err, ErrNoServer) {
		t.Errorf("unknown server: %v, want ErrNoServer", err)
	}
	for _, name := range []string{"docs", "containerised"} {
		if _, err := Rewrite(path, old, Options{SandboxRun: sbx, Server: name}); !errors.Is(err, ErrNotWrappable) {
			t.Errorf("%s: %v, want ErrNotWrappable", name, err)
		}
	}
}

// TestApplyUndo: Apply keeps the mode and leaves a backup; a second
// Apply refuses to replace that backup; Undo restores the bytes exactly.
func TestApplyUndo(t *testing.T) {
	td := testdataDir(t)
	for _, c := range clients {
		t.Run(string(c.format), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, c.file)
			old, _ := os.ReadFile(filepath.Join(td, c.file))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, old, 0o600); err != nil {
				t.Fatal(err)
			}
			p, err := Rewrite(path, old, Options{SandboxRun: sbx})
			if err != nil {
				t.Fatal(err)
			}
			if err := Apply(path, p); err != nil {
				t.Fatal(err)
			}
			assertFile(t, path, p.New, 0o600)
			assertFile(t, Backup(path), old, 0o600)
			if err := Apply(path, p); !errors.Is(err, ErrBackupExists) {
				t.Errorf("second Apply: %v, want ErrBackupExists", err)
			}
			assertFile(t, Backup(path), old, 0o600)
			if err := Undo(path); err != nil {
				t.Fatal(err)
			}
			assertFile(t, path, old, 0o600)
			if _, err := os.Lstat(Backup(path)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("backup left after undo: %v", err)
			}
			if err := Undo(path); !errors.Is(err, ErrNoBackup) {
				t.Errorf("undo without backup: %v, want ErrNoBackup", err)
			}
			ents, _ := os.ReadDir(filepath.Dir(path))
			if len(ents) != 1 {
				t.Errorf("left in the directory: %v", ents)
			}
		})
	}
}

func assertFile(t *testing.T, path string, want []byte, mode os.FileMode) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\n%s\nwant\n%s", path, got, want)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != mode {
		t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), mode)
	}
}

// TestApplyChangedMeanwhile: a file rewritten between Rewrite and Apply
// keeps the other writer's bytes and no backup is left.
func TestApplyChangedMeanwhile(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".mcp.json")
	old := []byte(`{"mcpServers": {"a": {"command": "node"}}}`)
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Rewrite(path, old, Options{SandboxRun: sbx})
	if err != nil {
		t.Fatal(err)
	}
	theirs := []byte(`{"mcpServers": {}}`)
	if err := os.WriteFile(path, theirs, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Apply(path, p); !errors.Is(err, ErrChanged) {
		t.Fatalf("Apply: %v, want ErrChanged", err)
	}
	assertFile(t, path, theirs, 0o644)
	if _, err := os.Lstat(Backup(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("backup left: %v", err)
	}
}

// TestBadConfigs: what cannot be read is refused, never half-rewritten.
func TestBadConfigs(t *testing.T) {
	for _, tc := range []struct {
		name, path, content string
		want                error
	}{
		{"duplicate", ".mcp.json", `{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}`, ErrParse},
		{"trailing", ".mcp.json", `{"mcpServers": {}} x`, ErrParse},
		{"unterminated", ".mcp.json", `{"mcpServers": {"a": {"command": "x`, ErrParse},
		{"deep", ".mcp.json", strings.Repeat("[", 10000), ErrParse},
		{"toml", "config.toml", "[mcp_servers.a\ncommand = 1", ErrParse},
		{"unknown", "notes.json", `{"x": 1}`, ErrFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Rewrite(tc.path, []byte(tc.content), Options{SandboxRun: sbx})
			if !errors.Is(err, tc.want) {
				t.Errorf("%v, want %v", err, tc.want)
			}
		})
	}
}

// TestCodexInline: a server written as an inline table cannot be edited
// line by line; it is left alone with a note, and named with --server it
// is an error.
func TestCodexInline(t *testing.T) {
	content := []byte("[mcp_servers]\ninline = { command = \"node\", args = [\"s.js\"] }\n")
	p, err := Rewrite("config.toml", content, Options{SandboxRun: sbx})
	if err != nil {
		t.Fatal(err)
	}
	if p.Changed() || len(p.Outcomes) != 1 || p.Outcomes[0].Wrapped || !strings.Contains(p.Outcomes[0].Note, "[mcp_servers.inline]") {
		t.Errorf("outcomes %+v changed %v", p.Outcomes, p.Changed())
	}
	if _, err := Rewrite("config.toml", content, Options{SandboxRun: sbx, Server: "inline"}); !errors.Is(err, ErrNotWrappable) {
		t.Errorf("--server inline: %v", err)
	}
}

// TestCheckCatchesStrayEdits: an output that differs from the input in
// anything but the wrapped servers' command and args fails the check
// (the mutation a wrong span would make).
func TestCheckCatchesStrayEdits(t *testing.T) {
	td := testdataDir(t)
	for _, tc := range []struct{ file, from, to string }{
		{"claude-user/.claude.json", `"numStartups": 42`, `"numStartups": 43`},
		{"codex/config.toml", `startup_timeout_sec = 20`, `startup_timeout_sec = 21`},
		{"vscode/.vscode/mcp.json", `"cwd": "${workspaceFolder}/tools"`, `"cwd": "${workspaceFolder}"`},
	} {
		path := filepath.Join(td, tc.file)
		old, _ := os.ReadFile(path)
		p, err := Rewrite(path, old, Options{SandboxRun: sbx, Home: "/home/me"})
		if err != nil {
			t.Fatal(err)
		}
		var servers []located
		if p.Format == Codex {
			servers, err = codexServers(old)
		} else {
			servers, err = jsonServers(p.Format, path, old, "/home/me")
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := p.check(servers); err != nil {
			t.Fatalf("%s: the unmutated plan fails the check: %v", tc.file, err)
		}
		if !bytes.Contains(p.New, []byte(tc.from)) {
			t.Fatalf("%s: %q not in the output", tc.file, tc.from)
		}
		p.New = bytes.Replace(p.New, []byte(tc.from), []byte(tc.to), 1)
		if err := p.check(servers); !errors.Is(err, ErrCheck) {
			t.Errorf("%s: a stray edit passed the check: %v", tc.file, err)
		}
	}
}
