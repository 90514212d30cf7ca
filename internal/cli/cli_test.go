package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/policy"
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

// TestPolicyFlags: every run flag either sets a policy field through the
// one table (policyFlags) or is named here as one that does not, so that a
// new flag cannot be forgotten in the policy; and each row sets its own
// field from its own value, over the profile's.
func TestPolicyFlags(t *testing.T) {
	notPolicy := map[string]bool{"config": true, "report": true, "audit": true, "bwrap": true, "runsc": true, "image": true, "pull": true, "podman": true, "image-runtime": true,
		"tty": true, "no-tty": true, "dry-run": true, "summary": true, "verbose": true,
		// dev-env adds what devenv gathers from the host after the
		// policy is built; exit-code-refusal is the CLI's own status.
		"dev-env": true, "exit-code-refusal": true,
		"settings": true, // --settings adds to the fields after the flags (TestSettingsFlag)
		// map-owner is how root's run mounts the workdir, not what it allows.
		"map-owner": true}
	rows := map[string]bool{}
	f := newRunFlags()
	for _, pf := range policyFlags {
		if f.fs.Lookup(pf.name) == nil {
			t.Errorf("policyFlags row %q names no run flag", pf.name)
		}
		rows[pf.name] = true
	}
	f.fs.VisitAll(func(fl *pflag.Flag) {
		if !rows[fl.Name] && !notPolicy[fl.Name] {
			t.Errorf("run flag --%s is neither in policyFlags nor named as a flag that sets no policy field", fl.Name)
		}
		if rows[fl.Name] && notPolicy[fl.Name] {
			t.Errorf("run flag --%s is in policyFlags and named as setting no policy field", fl.Name)
		}
	})
	uid := "1000:1000"
	if os.Geteuid() != 0 {
		uid = "" // --user is refused unless root: checked in TestRunRefusals' table
	}
	dir := t.TempDir()
	t.Setenv("SSH_AUTH_SOCK", "/agent.sock") // what --ssh-agent hands in
	for _, c := range []struct {
		flag, val string
		got       func(p policy.Policy) any
		want      any
	}{
		{"workdir", "/w", func(p policy.Policy) any { return p.Workdir }, "/w"},
		{"write", "/o", func(p policy.Policy) any { return strings.Join(p.Write, ",") }, "/o"},
		{"read", "/r", func(p policy.Policy) any { return strings.Join(p.Read, ",") }, "/r"},
		{"protect", ".x", func(p policy.Policy) any { return strings.Join(p.Protect, ",") }, ".x"},
		{"env", "K=v", func(p policy.Policy) any { return p.Env["K"] }, "v"},
		{"home", "/h", func(p policy.Policy) any { return p.Home }, "/h"},
		{"session", "s1", func(p policy.Policy) any { return p.Session }, "s1"},
		{"cache", "go", func(p policy.Policy) any { return strings.Join(p.Caches, ",") }, "go"},
		{"pass-env", "TOKEN", func(p policy.Policy) any { return strings.Join(p.PassEnv, ",") }, "TOKEN"},
		{"allow-host", "example.com", func(p policy.Policy) any { return strings.Join(p.AllowHosts, ",") }, "example.com"},
		{"preset", "npm", func(p policy.Policy) any { return strings.Join(p.Presets, ",") + " " + strings.Join(p.AllowHosts, ",") }, "npm p.example,registry.npmjs.org"},
		{"allow-http", "GET h.example/x", func(p policy.Policy) any { return strings.Join(p.AllowHTTP, ",") }, "GET h.example/x"},
		{"upstream-ca", "/ca.pem", func(p policy.Policy) any { return p.UpstreamCA }, "/ca.pem"},
		{"egress-socket", "/e.sock", func(p policy.Policy) any { return p.EgressSocket }, "/e.sock"},
		{"llm-socket", "/l.sock", func(p policy.Policy) any { return p.LLMSocket }, "/l.sock"},
		{"llm-env", "BASE_URL", func(p policy.Policy) any { return strings.Join(p.LLMEnv, ",") }, "BASE_URL"},
		{"ptrace", "true", func(p policy.Policy) any { return p.Ptrace }, true},
		{"secret", "GH=file:/t@a.example,b.example", func(p policy.Policy) any { return fmt.Sprint(p.Secrets) }, "[{GH [a.example b.example] file:/t false}]"},
		{"secret-in", "body", func(p policy.Policy) any { return fmt.Sprint(p.Secrets) }, "[{P [p.example] env:Q true}]"},
		{"llm-key-env", "ANTHROPIC_API_KEY", func(p policy.Policy) any { return p.LLMKeyEnv }, "ANTHROPIC_API_KEY"},
		{"sandbox", "off", func(p policy.Policy) any { return p.Sandbox }, policy.ModeOff},
		{"timeout", "90s", func(p policy.Policy) any { return time.Duration(p.Timeout) }, 90 * time.Second},
		{"memory", "2M", func(p policy.Policy) any { return p.Memory }, int64(2 << 20)},
		{"fsize", "3K", func(p policy.Policy) any { return p.FSize }, int64(3 << 10)},
		{"pids", "64", func(p policy.Policy) any { return p.Pids }, int64(64)},
		{"nofile", "32", func(p policy.Policy) any { return p.NoFile }, int64(32)},
		{"cpu-time", "30s", func(p policy.Policy) any { return time.Duration(p.CPUTime) }, 30 * time.Second},
		{"cgroup-base", "/sys/fs/cgroup/x", func(p policy.Policy) any { return p.CgroupBase }, "/sys/fs/cgroup/x"},
		{"tmp-size", "5M", func(p policy.Policy) any { return p.TmpSize }, int64(5 << 20)},
		{"shm-size", "6M", func(p policy.Policy) any { return p.ShmSize }, int64(6 << 20)},
		{"user", uid, func(p policy.Policy) any { return fmt.Sprintf("%d:%d", p.UID, p.GID) }, uid},
		{"ssh-agent", "true", func(p policy.Policy) any { return p.SSHAgent }, "/agent.sock"},
		{"unix-socket", "/u.sock", func(p policy.Policy) any { return strings.Join(p.UnixSockets, ",") }, "/u.sock"},
		{"unix-socket-unsafe", "/d.sock", func(p policy.Policy) any { return strings.Join(p.UnixSocketsUnsafe, ",") }, "/d.sock"},
		{"host-port", "5432", func(p policy.Policy) any { return strings.Join(p.HostPorts, ",") }, "5432"},
		{"publish", "80:8080", func(p policy.Policy) any { return strings.Join(p.Publish, ",") }, "80:8080"},
	} {
		if !rows[c.flag] {
			t.Errorf("--%s: not in policyFlags", c.flag)
			continue
		}
		delete(rows, c.flag)
		if c.val == "" {
			continue
		}
		// The profile holds another value for every field a flag sets.
		prof := filepath.Join(dir, c.flag+".json")
		os.WriteFile(prof, []byte(`{"workdir":"/pw","write":["/pw2"],"read":["/pr"],"protect":[".p"],"env":{"K":"p"},"home":"/ph",
"session":"ps","caches":["npm"],"pass_env":["P"],"allow_hosts":["p.example"],"allow_http":["GET p.example/"],"upstream_ca":"/pca.pem","egress_socket":"/pe.sock","llm_socket":"/pl.sock",
"llm_env":["P_URL"],"sandbox":"bwrap","timeout":"1s","memory":"9M","fsize":"9K","pids":9,"nofile":9,"cpu_time":"9s",
"cgroup_base":"/pc","tmp_size":"9M","shm_size":"9M","secrets":[{"name":"P","hosts":["p.example"],"from":"env:Q"}],"llm_key_env":"PK"}`), 0o644)
		f := newRunFlags()
		if err := f.fs.Parse([]string{"--config", prof, "--" + c.flag + "=" + c.val}); err != nil {
			t.Fatalf("--%s=%s: %v", c.flag, c.val, err)
		}
		p, err := f.policy(func() (string, error) { return "/cwd", nil })
		if err != nil {
			t.Fatalf("--%s=%s: %v", c.flag, c.val, err)
		}
		if got := c.got(p); got != c.want {
			t.Errorf("--%s=%s sets %v, want %v", c.flag, c.val, got, c.want)
		}
	}
	for name := range rows {
		t.Errorf("policyFlags row %q has no case here", name)
	}
}
