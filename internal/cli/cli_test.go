package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs Run in-process with files for stdio and returns the exit
// status and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	out, _ := os.Create(filepath.Join(dir, "out"))
	errf, _ := os.Create(filepath.Join(dir, "err"))
	in, _ := os.Open(os.DevNull)
	defer out.Close()
	defer errf.Close()
	defer in.Close()
	code := Run(context.Background(), args, IO{Stdin: in, Stdout: out, Stderr: errf}, nil)
	o, _ := os.ReadFile(out.Name())
	e, _ := os.ReadFile(errf.Name())
	return code, string(o), string(e)
}

func TestRefusalsAreOneLine(t *testing.T) {
	wd := t.TempDir()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown subcommand", []string{"frobnicate"}, "unknown subcommand"},
		{"unknown flag", []string{"run", "--frob", "--", "true"}, "unknown flag"},
		{"no command", []string{"run", "--workdir", wd}, "no command"},
		{"command without -- refused after", []string{"run", "--workdir", wd, "--user", "abc", "ls", "-l"}, "--user"},
		{"only dashes", []string{"run", "--workdir", wd, "--", "--", "--"}, "no command"},
		{"bad env", []string{"run", "--workdir", wd, "--env", "NOVALUE", "--", "true"}, "KEY=VALUE"},
		{"missing workdir", []string{"run", "--workdir", "/nonexistent/x", "--", "true"}, "does not exist"},
		{"bad user", []string{"run", "--workdir", wd, "--user", "abc", "--", "true"}, "--user"},
		{"bad tmp size", []string{"run", "--workdir", wd, "--tmp-size", "lots", "--", "true"}, "tmp-size"},
		{"bad mode", []string{"run", "--workdir", wd, "--sandbox", "docker", "--", "true"}, "sandbox"},
		{"llm-env alone", []string{"run", "--workdir", wd, "--llm-env", "X", "--", "true"}, "llm"},
		{"proxy without listen", []string{"proxy"}, "--listen"},
		{"repeated flag", []string{"run", "--workdir", wd, "--workdir", "/", "--", "true"}, "more than once"},
		{"repeated proxy flag", []string{"proxy", "--mode", "0600", "--mode", "0660"}, "more than once"},
		{"empty workdir", []string{"run", "--workdir", "", "--", "true"}, "empty"},
		{"dot-dot", []string{"run", "--workdir", wd + "/..", "--", "true"}, "'..'"},
		{"relative profile path", []string{"run", "--config", writeFile(t, `{"workdir":"rel"}`), "--", "true"}, "absolute"},
		{"max-message", []string{"mcp", "--workdir", wd, "--max-message", "10", "--", "true"}, "--max-message"},
		{"report dir", []string{"run", "--workdir", wd, "--report", wd + "/no/r.json", "--", "true"}, "--report"},
		{"setup argument", []string{"setup", "now"}, "no arguments"},
		{"setup root without os-release", []string{"setup", "--dry-run", "--root", wd}, "cannot tell the distribution"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tt.args...)
			if code != ExitRefused {
				t.Fatalf("exit %d, want %d (%q)", code, ExitRefused, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "sandbox-run: ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q: want one line holding %q", stderr, tt.want)
			}
			if !strings.Contains(stderr, "fix") && tt.name != "bad mode" {
				t.Errorf("stderr %q names no fix", stderr)
			}
		})
	}
}

func TestProfileThenFlags(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.json")
	os.WriteFile(prof, []byte(`{"workdir":"/from/profile","env":{"A":"1","B":"2"},"allow_hosts":["a.example"],"timeout":"5s"}`), 0o644)
	f := newRunFlags()
	if err := f.fs.Parse([]string{"--config", prof, "--env", "B=3", "--allow-host", "b.example"}); err != nil {
		t.Fatal(err)
	}
	p, err := f.policy(func() (string, error) { return "/cwd", nil })
	if err != nil {
		t.Fatal(err)
	}
	if p.Workdir != "/from/profile" || p.Env["A"] != "1" || p.Env["B"] != "3" ||
		len(p.AllowHosts) != 1 || p.AllowHosts[0] != "b.example" || p.Timeout == 0 {
		t.Errorf("merged policy = %+v", p)
	}
}

func TestParseUser(t *testing.T) {
	for in, want := range map[string][2]int{"1000": {1000, 1000}, "1000:2000": {1000, 2000}} {
		u, g, err := parseUser(in)
		if err != nil || u != want[0] || g != want[1] {
			t.Errorf("parseUser(%q) = %d,%d,%v", in, u, g, err)
		}
	}
	for _, bad := range []string{"0", "-1", "x", "1000:", "1000:0", "01000", ""} {
		if _, _, err := parseUser(bad); err == nil {
			t.Errorf("parseUser(%q) accepted", bad)
		}
	}
}

func TestScrubEnvValues(t *testing.T) {
	// Heap strings (never literals, which may be read-only memory).
	mk := func(s string) string { return string([]byte(s)) }
	args := []string{mk("--env"), mk("TOKEN=secret"), mk("--env=K=v2"), mk("--workdir"), mk("/w"), mk("--"), mk("--env"), mk("X=keep")}
	scrubEnvValues(args)
	got := strings.Join(args, " ")
	if got != "--env TOKEN=****** --env=K=** --workdir /w -- --env X=keep" {
		t.Errorf("scrubbed argv = %q", got)
	}
}

// writeFile writes s to a new file and returns its path.
func writeFile(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCommandArgs(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--workdir", "/w", "--", "node", "s.js", "--port", "1"}, "node s.js --port 1"},
		{[]string{"--workdir", "/w", "node", "s.js", "--port", "1"}, "node s.js --port 1"},
		{[]string{"--workdir", "/w", "--", "--", "node", "--"}, "node --"},
		{[]string{"node", "--workdir", "/x"}, "node --workdir /x"},
		{[]string{"--", "--", "--"}, ""},
	} {
		f := newRunFlags()
		if err := f.fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(commandArgs(f.fs), " "); got != tt.want {
			t.Errorf("commandArgs(%q) = %q, want %q", tt.args, got, tt.want)
		}
		if tt.args[0] == "node" && f.workdir != "" {
			t.Errorf("a flag after the command was taken as ours: --workdir %q", f.workdir)
		}
	}
}

// TestRefusalReachesMCPClient: a refused run or mcp whose stdin is a pipe
// carrying a JSON-RPC request answers it with an error holding the reason;
// other input gets nothing on stdout.
func TestRefusalReachesMCPClient(t *testing.T) {
	wd := t.TempDir()
	for _, tt := range []struct {
		name, input, want string
		args              []string
	}{
		{"run", `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{}}` + "\n", `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"sandbox-run: --tmp-size`, []string{"run", "--workdir", wd, "--tmp-size", "x", "node", "s.js"}},
		{"mcp after a notification", `{"jsonrpc":"2.0","method":"notifications/x"}` + "\n" + `{"jsonrpc":"2.0","id":"a","method":"initialize"}` + "\n", `{"jsonrpc":"2.0","id":"a","error":{"code":-32603,"message":"sandbox-run: --max-message`, []string{"mcp", "--workdir", wd, "--max-message", "1", "--", "node"}},
		{"not JSON-RPC", "hello\n", "", []string{"run", "--workdir", wd, "--tmp-size", "x", "--", "cat"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			out, _ := os.Create(filepath.Join(dir, "out"))
			errf, _ := os.Create(filepath.Join(dir, "err"))
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			go func() { w.WriteString(tt.input); w.Close() }()
			code := Run(context.Background(), tt.args, IO{Stdin: r, Stdout: out, Stderr: errf}, nil)
			r.Close()
			o, _ := os.ReadFile(out.Name())
			e, _ := os.ReadFile(errf.Name())
			if code != ExitRefused || strings.Count(string(e), "\n") != 1 {
				t.Fatalf("exit %d, stderr %q: want 125 and one line", code, e)
			}
			if tt.want == "" && len(o) != 0 || !strings.HasPrefix(string(o), tt.want) || strings.Count(string(o), "\n") > 1 {
				t.Errorf("stdout %q, want one line starting %q", o, tt.want)
			}
		})
	}
}

// TestWatchFirstKeepsEveryByte: the relay gets the input whole, even a
// line past the buffer, and only a request among the first lines has its
// id reported.
func TestWatchFirstKeepsEveryByte(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"method":"x","params":"` + strings.Repeat("a", 3<<20) + `"}` + "\n"
	for _, tt := range []struct {
		in     string
		wantID string
	}{
		{`{"jsonrpc":"2.0","id":5,"method":"initialize"}` + "\n" + `{"jsonrpc":"2.0","method":"n"}` + "\n", "5"},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":"b","method":"m"}` + "\n", `"b"`},
		{big + `{"jsonrpc":"2.0","id":2,"method":"m"}` + "\n", "2"},
		{"", ""},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() { w.WriteString(tt.in); w.Close() }()
		rd, ids, stop := watchFirst(r)
		got, _ := io.ReadAll(rd)
		stop()
		r.Close()
		if string(got) != tt.in {
			t.Errorf("read %d bytes, want %d", len(got), len(tt.in))
		}
		if id := <-ids; string(id) != tt.wantID {
			t.Errorf("id %q, want %q", id, tt.wantID)
		}
	}
}
