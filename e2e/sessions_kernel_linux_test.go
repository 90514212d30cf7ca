package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestCommandWithoutDashes: the first positional argument ends the flags,
// so a harness that strips "--" (the MCP Inspector) or adds one starts the
// same command, and the command's own flags stay its own.
func TestCommandWithoutDashes(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"with --", []string{"--", "sh", "-c", `echo "$0 $*"`, "a", "--workdir", "/x"}},
		{"without --", []string{"sh", "-c", `echo "$0 $*"`, "a", "--workdir", "/x"}},
		{"with -- --", []string{"--", "--", "sh", "-c", `echo "$0 $*"`, "a", "--workdir", "/x"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, "", append([]string{"run", "--workdir", w}, tt.args...)...)
			if r.code != 0 || r.stdout != "a --workdir /x\n" {
				t.Errorf("exit %d, stdout %q, stderr %q; want the command's own --workdir", r.code, r.stdout, r.stderr)
			}
		})
	}
}

// TestRefusalAnswersMCPClient: a refused mcp or run whose stdin carries an
// MCP client's initialize answers it with a JSON-RPC error naming the
// reason, besides the one line on stderr.
func TestRefusalAnswersMCPClient(t *testing.T) {
	w := sandboxtest.WorkDir(t)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"
	for _, sub := range []string{"run", "mcp"} {
		for _, tt := range []struct {
			flags []string
			want  string
		}{
			{[]string{"--write", w + "/absent"}, "--write " + w + "/absent: does not exist"}, // found setting up
			{[]string{"--tmp-size", "lots"}, "--tmp-size"},                                   // found parsing
		} {
			r := run(t, init, append(append([]string{sub, "--workdir", w}, tt.flags...), "node", "server.js")...)
			oneLine(t, r, tt.want)
			if !strings.HasPrefix(r.stdout, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"sandbox-run: `) ||
				!strings.Contains(r.stdout, tt.want) || strings.Count(r.stdout, "\n") != 1 {
				t.Errorf("%s %v: stdout %q: want one JSON-RPC error for id 1 naming %q", sub, tt.flags, r.stdout, tt.want)
			}
		}
	}
}

// TestOfflineFailsFast: without egress, npm is told to work offline and
// fails at once with its own error, and sandbox-run says the sandbox has
// no network and how to allow a host. With an allow-list the settings are
// absent (the control: they are set only when no egress is allowed).
func TestOfflineFailsFast(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	r := sandboxed(t, w, "echo npm=$npm_config_offline pip=$PIP_RETRIES go=$GOPROXY uv=$UV_OFFLINE")
	if r.stdout != "npm=true pip=0 go=off uv=1\n" {
		t.Errorf("without egress: %q %q", r.stdout, r.stderr)
	}
	r = sandboxed(t, w, "echo npm=$npm_config_offline pip=$PIP_RETRIES go=$GOPROXY", "--allow-host", "example.com")
	if r.stdout != "npm=\npip=\ngo=\n" && r.stdout != "npm= pip= go=\n" {
		t.Errorf("with egress the offline settings leaked: %q %q", r.stdout, r.stderr)
	}
	if _, err := exec.LookPath("npx"); err != nil {
		sandboxtest.Unavailable(t, "npx", "install npm (apt-get install -y npm)")
	}
	start := time.Now()
	r = run(t, "", "run", "--workdir", w, "--env", "HOME=/tmp", "--", "npx", "-y", "cowsay@1.6.0", "hi")
	took := time.Since(start)
	if r.code == 0 || !strings.Contains(r.stderr, "ENOTCACHED") {
		t.Fatalf("npx offline: exit %d, stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "sandbox-run: note: the sandbox has no network") || !strings.Contains(r.stderr, "--allow-host registry.npmjs.org") {
		t.Errorf("no network note: %q", r.stderr)
	}
	// npm's own retries took 70 s; its start-up alone takes a second or
	// more on a loaded machine, so the bound is generous but far below.
	if took > 15*time.Second {
		t.Errorf("npx offline took %v", took)
	}
	t.Logf("npx offline failed in %v", took)
}

// TestNotFoundNamesTheHostCopy: a command the host has outside the
// sandbox's PATH and view fails with 127 saying where it is and how to
// make it visible; the fix it names works (the positive control).
func TestNotFoundNamesTheHostCopy(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	tools := sandboxtest.WorkDir(t)
	dir := filepath.Join(tools, "bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := "sbxtool" + randHex(t)[:6]
	mustWrite(t, filepath.Join(dir, name), "#!/bin/sh\necho tool ran\n")
	if err := os.Chmod(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + dir + ":" + os.Getenv("PATH")}
	r := runEnv(t, env, "", "run", "--workdir", w, name)
	if r.code != 127 {
		t.Fatalf("exit %d, want 127: %q", r.code, r.stderr)
	}
	for _, want := range []string{"host has it at " + dir + "/" + name, "not on the sandbox's PATH", "not shown inside", "--env PATH=" + dir + ":", "--read " + dir} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
	r = runEnv(t, env, "", "run", "--workdir", w, "--read", dir, "--env", "PATH="+dir+":/usr/bin:/bin", name)
	if r.code != 0 || r.stdout != "tool ran\n" {
		t.Errorf("with the fix: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runEnv(t, env, "", "run", "--workdir", w, "sbx-nowhere-"+randHex(t))
	if r.code != 127 || strings.Contains(r.stderr, "host has it") {
		t.Errorf("a command the host lacks too: exit %d %q", r.code, r.stderr)
	}
}
