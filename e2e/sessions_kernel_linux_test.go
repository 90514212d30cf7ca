package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/landlock"
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

// TestRefusalAnswersLateClient: a client that sends initialize only after
// a while (the MCP Inspector starts its server first) still gets the
// reason of a sandbox that could not be set up, for mcp and run.
func TestRefusalAnswersLateClient(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	for _, sub := range []string{"mcp", "run"} {
		c := exec.Command(bin, sub, "--workdir", w, "--write", w+"/absent", "node", "server.js")
		in, err := c.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out, errb strings.Builder
		c.Stdout, c.Stderr = &out, &errb
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		in.Write([]byte(`{"jsonrpc":"2.0","id":"late","method":"initialize","params":{}}` + "\n"))
		err = c.Wait()
		in.Close()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 {
			t.Errorf("%s: %v, want exit 125", sub, err)
		}
		if !strings.HasPrefix(out.String(), `{"jsonrpc":"2.0","id":"late","error":{"code":-32603`) || !strings.Contains(out.String(), "does not exist") {
			t.Errorf("%s: stdout %q, stderr %q: want the reason as a JSON-RPC error", sub, out.String(), errb.String())
		}
	}
}

// TestOfflineFailsFast: without egress, npm (npx), pip and git fail at
// once with their own error, never retrying, and sandbox-run says the
// sandbox has no network and which --allow-host would help. With an
// allow-list the offline settings are absent (they are set only when no
// egress is allowed).
//
// The issue asks for "under 1 s"; on a quiet machine npx fails in about
// 0.7 s (npm's own start-up is most of it) and pip and git in less. A
// wall-clock assertion near that would pass or fail by the CI host's
// load, so the test asserts what makes the failure fast: npm's cache-only
// mode (ENOTCACHED) with no request made, and no retry by npm or pip;
// each control overrides one offline setting and must show the request
// or retry the check looks for (so the check can fail). The times are
// logged; the one time bound is 30 s, the MCP clients' give-up time, far
// from the 70 s of npm's retries, against which it guards.
func TestOfflineFailsFast(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	r := sandboxed(t, w, "echo npm=$npm_config_offline/$npm_config_fetch_retries pip=$PIP_RETRIES go=$GOPROXY uv=$UV_OFFLINE")
	if r.stdout != "npm=true/0 pip=0 go=off uv=1\n" {
		t.Errorf("without egress: %q %q", r.stdout, r.stderr)
	}
	r = sandboxed(t, w, "echo npm=$npm_config_offline pip=$PIP_RETRIES go=$GOPROXY", "--allow-host", "example.com")
	if r.stdout != "npm= pip= go=\n" {
		t.Errorf("with egress the offline settings leaked: %q %q", r.stdout, r.stderr)
	}
	have := func(tool string) bool {
		r := sandboxed(t, w, "command -v "+tool)
		return r.code == 0 && strings.TrimSpace(r.stdout) != ""
	}
	t.Run("npx", func(t *testing.T) {
		if !have("npx") {
			sandboxtest.Unavailable(t, "npx inside the sandbox", "install npm (apt-get install -y npm)")
		}
		start := time.Now()
		r := run(t, "", "run", "--workdir", w, "--", "npx", "--version")
		t.Logf("npx --version (npm's start-up alone) took %v", time.Since(start))
		// npm logs each request it makes at level http ("http fetch GET
		// URL attempt N failed with ...").
		npx := []string{"run", "--workdir", w, "--env", "npm_config_loglevel=http", "--", "npx", "-y", "cowsay@1.6.0", "hi"}
		r, took := timedRun(t, npx...)
		if r.code == 0 || !strings.Contains(r.stderr, "ENOTCACHED") || strings.Contains(r.stderr, "http fetch") {
			t.Errorf("npx offline: exit %d, stderr %q; want ENOTCACHED and no request made", r.code, r.stderr)
		}
		note(t, r, "npx", "--allow-host registry.npmjs.org")
		t.Logf("npx offline failed in %v", took)
		// Control: offline mode overridden, npm makes its request, once:
		// the check above sees a request, and fetch_retries=0 holds.
		r, took = timedRun(t, append(npx[:3:3], append([]string{"--env", "npm_config_offline=false"}, npx[3:]...)...)...)
		if r.code == 0 || strings.Count(r.stderr, "http fetch GET") != 1 || !strings.Contains(r.stderr, "attempt 1 failed") {
			t.Errorf("control (npm_config_offline=false): exit %d, stderr %q; want one request, not retried", r.code, r.stderr)
		}
		t.Logf("control: npx with its request, not retried, failed in %v", took)
	})
	t.Run("pip", func(t *testing.T) {
		if !have("pip3") {
			sandboxtest.Unavailable(t, "pip3 inside the sandbox", "install pip (apt-get install -y python3-pip)")
		}
		pip := []string{"run", "--workdir", w, "--", "pip3", "download", "--no-deps", "-d", "/tmp/d", "sbx-offline-probe"}
		r, took := timedRun(t, pip...)
		if r.code == 0 || !strings.Contains(r.stderr, "from versions: none") || strings.Contains(r.stderr, "Retrying") {
			t.Errorf("pip offline: exit %d, stderr %q; want pip's own error and no retry", r.code, r.stderr)
		}
		note(t, r, "pip3", "--allow-host pypi.org")
		t.Logf("pip offline failed in %v", took)
		// Control: one retry allowed, pip says so (the check sees retries).
		r, took = timedRun(t, append(pip[:3:3], append([]string{"--env", "PIP_RETRIES=1"}, pip[3:]...)...)...)
		if r.code == 0 || strings.Count(r.stderr, "Retrying (Retry(") != 1 {
			t.Errorf("control (PIP_RETRIES=1): exit %d, stderr %q; want one retry", r.code, r.stderr)
		}
		t.Logf("control: pip with one retry failed in %v", took)
	})
	t.Run("git", func(t *testing.T) {
		if !have("git") {
			sandboxtest.Unavailable(t, "git inside the sandbox", "install git")
		}
		// git does not retry; it fails on name resolution with 128.
		r, took := timedRun(t, "run", "--workdir", w, "--", "git", "ls-remote", "https://github.com/sandbox-run/sbx-offline-probe.git")
		if r.code != 128 || !strings.Contains(r.stderr, "Could not resolve host") {
			t.Errorf("git offline: exit %d, stderr %q; want 128, Could not resolve host", r.code, r.stderr)
		}
		note(t, r, "git", "--allow-host github.com")
		t.Logf("git offline failed in %v", took)
	})
}

// timedRun runs sandbox-run with args and returns how long it took,
// failing the test past 30 s (an MCP client's give-up time).
func timedRun(t *testing.T, args ...string) (result, time.Duration) {
	t.Helper()
	start := time.Now()
	r := run(t, "", args...)
	took := time.Since(start)
	if took > 30*time.Second {
		t.Errorf("sandbox-run %v took %v: longer than an MCP client waits", args, took)
	}
	return r, took
}

// note checks sandbox-run's one-line no-network note after tool failed.
func note(t *testing.T, r result, tool, fix string) {
	t.Helper()
	if !strings.Contains(r.stderr, "sandbox-run: note: the sandbox has no network (no --allow-host given): "+tool+" could not reach its hosts") ||
		!strings.Contains(r.stderr, fix) {
		t.Errorf("no network note for %s naming %q: %q", tool, fix, r.stderr)
	}
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

// TestSessionHomeAndCaches: a session's home and a shared cache survive
// between two runs; nothing appears in the workdir; the variables point
// at them; without them HOME is the private /tmp, gone after the run (the
// control that the second run's finds are the session's doing).
func TestSessionHomeAndCaches(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	data := sandboxtest.WorkDir(t) // as root the data dir is /var/lib/sandbox-run whatever XDG says
	env := []string{"XDG_DATA_HOME=" + data}
	session := "e2e-" + randHex(t)[:8]
	args := func(extra ...string) []string {
		return append([]string{"run", "--workdir", w, "--session", session, "--cache", "npm", "--cache", "go"}, extra...)
	}
	r := runEnv(t, env, "", args("--", "sh", "-c", `echo kept > "$HOME/state" && echo c > "$npm_config_cache/entry" && echo "$HOME|$GOMODCACHE|$GOCACHE"`)...)
	if r.code != 0 {
		t.Fatalf("first run: exit %d %q", r.code, r.stderr)
	}
	paths := strings.Split(strings.TrimSpace(r.stdout), "|")
	if len(paths) != 3 || !strings.HasSuffix(paths[0], "/sessions/"+session+"/home") ||
		!strings.HasSuffix(paths[1], "/go/mod") || !strings.HasSuffix(paths[2], "/go/build") {
		t.Fatalf("variables %q", r.stdout)
	}
	if os.Geteuid() == 0 {
		t.Cleanup(func() { os.RemoveAll("/var/lib/sandbox-run/sessions/" + session) })
	}
	r = runEnv(t, env, "", args("--", "sh", "-c", `cat "$HOME/state" "$npm_config_cache/entry"`)...)
	if r.code != 0 || r.stdout != "kept\nc\n" {
		t.Errorf("second run: exit %d %q %q; want the home and the cache kept", r.code, r.stdout, r.stderr)
	}
	// Control: without --session the home is the private /tmp, so the
	// same file is gone in the next run.
	r = run(t, "", "run", "--workdir", w, "--", "sh", "-c", `echo "$HOME"; echo x > "$HOME/state"`)
	r2 := run(t, "", "run", "--workdir", w, "--", "sh", "-c", `cat "$HOME/state" 2>/dev/null || echo gone`)
	if r.stdout != "/tmp\n" || r2.stdout != "gone\n" {
		t.Errorf("default home: %q then %q, want /tmp then gone", r.stdout, r2.stdout)
	}
	ents, err := os.ReadDir(w)
	if err != nil || len(ents) != 0 {
		t.Errorf("the workdir got %v (%v); nothing was written there by the command", ents, err)
	}
	// Two users never share a cache: the cache sits under this user's
	// data dir, in a directory named after the sandbox's uid, 0700.
	// The data dir is sandbox-run's own state: a --write exposing it is
	// refused (the positive control is the first run above, which bound
	// dirs inside it itself).
	dataDir := strings.TrimSuffix(paths[0], "/sessions/"+session+"/home")
	r = runEnv(t, env, "", "run", "--workdir", w, "--write", dataDir, "--", "true")
	oneLine(t, r, dataDir, "own state")
	goCache := filepath.Dir(paths[1])
	fi, err := os.Stat(goCache)
	if err != nil || fi.Mode().Perm() != 0o700 || !strings.Contains(goCache, "/caches/uid-") {
		t.Errorf("cache dir %s: %v %v, want 0700 under caches/uid-N", goCache, fi, err)
	}
}

// TestProxySocketOwner: sandbox-run proxy gives its socket the --owner,
// --group and --mode asked for, so a root-run node proxy needs no chown
// after a restart; an unprivileged user cannot give it away.
func TestProxySocketOwner(t *testing.T) {
	d := sandboxtest.WorkDir(t)
	sock := filepath.Join(d, "egress.sock")
	owner, group := os.Geteuid(), os.Getegid()
	if owner == 0 {
		owner, group = 65534, 65534
	}
	c := exec.Command(bin, "proxy", "--listen", sock, "--allow-host", "example.com", "--mode", "0660",
		"--owner", strconv.Itoa(owner), "--group", strconv.Itoa(group))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Signal(syscall.SIGTERM); c.Wait() }()
	var st syscall.Stat_t
	for deadline := time.Now().Add(10 * time.Second); syscall.Lstat(sock, &st) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the proxy's socket never appeared")
		}
	}
	if int(st.Uid) != owner || int(st.Gid) != group || st.Mode&0o777 != 0o660 {
		t.Errorf("socket %d:%d %o, want %d:%d 660", st.Uid, st.Gid, st.Mode&0o777, owner, group)
	}
	if os.Geteuid() != 0 {
		r := run(t, "", "proxy", "--listen", filepath.Join(d, "other.sock"), "--owner", "0")
		oneLine(t, r, "--owner", "only root")
	}
}

// TestEgressCounts: the report and --summary count the built-in proxy's
// allowed and refused connections and the bytes carried, whatever the
// mechanism (gVisor's once reported none). A refusal is counted for
// everyone; as root, a request to the test host is allowed and its bytes
// counted too.
func TestEgressCounts(t *testing.T) {
	for _, m := range []struct {
		name string
		need func(*testing.T)
	}{
		{"bwrap", needBwrap},
		{"landlock", func(t *testing.T) { sandboxtest.Landlock(t, landlock.NetABI) }},
		{"gvisor", func(t *testing.T) { sandboxtest.Runsc(t) }},
	} {
		t.Run(m.name, func(t *testing.T) {
			m.need(t)
			egressCounts(t, m.name)
		})
	}
}

func egressCounts(t *testing.T, mech string) {
	w := sandboxtest.WorkDir(t)
	report := filepath.Join(sandboxtest.WorkDir(t), "r.json")
	allow := "example.com"
	script := "curl -s -o /dev/null -m 10 --noproxy '' http://127.0.0.1:9/; curl -s -o /dev/null -m 10 http://169.254.169.254/"
	var h sandboxtest.TestHost
	if os.Geteuid() == 0 {
		h = sandboxtest.NewTestHost(t, 1)
		allow = h.HostPort()
		script += fmt.Sprintf("; curl -s -m 10 http://%s/ok", h.HostPort())
	}
	r := run(t, "", "run", "--sandbox", mech, "--workdir", w, "--allow-host", allow, "--report", report, "--summary", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var rep struct {
		Egress *struct {
			Allowed, Refused int64
			BytesIn          int64 `json:"bytes_in"`
		} `json:"egress"`
	}
	b, err := os.ReadFile(report)
	if err != nil || json.Unmarshal(b, &rep) != nil || rep.Egress == nil {
		t.Fatalf("report %s: %v", b, err)
	}
	if rep.Egress.Refused != 2 {
		t.Errorf("refused = %d, want 2: %s", rep.Egress.Refused, b)
	}
	if os.Geteuid() == 0 && (rep.Egress.Allowed != 1 || rep.Egress.BytesIn == 0 || !strings.Contains(r.stdout, "ok from test host")) {
		t.Errorf("allowed = %d, bytes in %d, stdout %q: want 1 allowed request with its bytes", rep.Egress.Allowed, rep.Egress.BytesIn, r.stdout)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("egress       %d allowed, 2 refused", rep.Egress.Allowed)) {
		t.Errorf("--summary lacks the egress line: %s", r.stderr)
	}
}

// TestNodeProxyAuditNamesRun: a node-wide proxy's audit lines carry the
// run id of the sandbox each connection came from (its relay names it),
// the same id as that run's report.
func TestNodeProxyAuditNamesRun(t *testing.T) {
	needBwrap(t)
	d := sandboxtest.WorkDir(t)
	sock := filepath.Join(d, "egress.sock")
	audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
	args := []string{"proxy", "--listen", sock, "--allow-host", "example.com", "--audit", audit}
	if os.Geteuid() == 0 {
		args = append(args, "--owner", "65534")
	}
	c := exec.Command(bin, args...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Signal(syscall.SIGTERM); c.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the proxy's socket never appeared")
		}
	}
	w := sandboxtest.WorkDir(t)
	report := filepath.Join(sandboxtest.WorkDir(t), "r.json")
	r := run(t, "", "run", "--workdir", w, "--egress-socket", sock, "--report", report, "--",
		"sh", "-c", "curl -s -o /dev/null -w '%{http_code}' -m 10 http://not-allowed.test/")
	if r.stdout != "403" {
		t.Fatalf("through the node proxy: %q %q", r.stdout, r.stderr)
	}
	var rep struct {
		RunID string `json:"run_id"`
	}
	b, _ := os.ReadFile(report)
	if json.Unmarshal(b, &rep) != nil || rep.RunID == "" {
		t.Fatalf("report %s", b)
	}
	lines, _ := os.ReadFile(audit)
	if !strings.Contains(string(lines), `"run_id":"`+rep.RunID+`"`) || !strings.Contains(string(lines), "not-allowed.test") {
		t.Errorf("node proxy audit %s lacks run %s", lines, rep.RunID)
	}
}

// TestLLMChannelAudited: with --audit, each request on the LLM channel is
// recorded (method, path, status, bytes, duration) and neither the query
// nor a header value nor a body reaches the audit; the request arrives as
// sent (the control: the server sees the key).
func TestLLMChannelAudited(t *testing.T) {
	needBwrap(t)
	dir := sandboxtest.WorkDir(t)
	sock := filepath.Join(dir, "llm.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	chownSocket(t, sock)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "llm-ok %s key=%s body=%s", r.URL.Path, r.Header.Get("X-Api-Key"), b)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	w := sandboxtest.WorkDir(t)
	audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
	r := sandboxed(t, w, `curl -sS -m 10 -H "X-Api-Key: sk-SECRETKEY" --data PROMPTTEXT "$SANDBOX_LLM_URL/v1/messages?key=QUERYKEY"`,
		"--llm-socket", sock, "--audit", audit)
	if r.stdout != "llm-ok /v1/messages key=sk-SECRETKEY body=PROMPTTEXT" {
		t.Fatalf("LLM channel: %q %q", r.stdout, r.stderr)
	}
	b, _ := os.ReadFile(audit)
	var rec map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["event"] == "llm_request" {
			rec = m
		}
	}
	if rec == nil || rec["method"] != "POST" || rec["path"] != "/v1/messages" || rec["status"] != float64(201) ||
		rec["bytes_out"] != float64(len("PROMPTTEXT")) || rec["bytes_in"].(float64) < 20 || rec["run_id"] == nil {
		t.Errorf("llm_request record %v in %s", rec, b)
	}
	for _, secret := range []string{"SECRETKEY", "QUERYKEY", "PROMPTTEXT"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the audit holds %s: %s", secret, b)
		}
	}
}

// TestSessionHomeKeepsShellConfig: the protected names (.bashrc, .yarnrc,
// ...) are not held in a session's home or a shared cache, sandbox-run's
// own state that no host tool reads, so a shell config the session writes
// there is read by the next run's shell. Controls in the same runs: the
// same name in the workdir, and in a --home DIR of the caller's, is
// quarantined; a git directory made in the session's home is still
// stripped (a link from the workdir could hand it to host git).
func TestSessionHomeKeepsShellConfig(t *testing.T) {
	needBwrap(t)
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "landlock" {
				sandboxtest.Landlock(t, landlock.MinABI)
			}
			w := sandboxtest.WorkDir(t)
			data := sandboxtest.WorkDir(t) // as root the data dir is /var/lib/sandbox-run whatever XDG says
			env := []string{"XDG_DATA_HOME=" + data}
			session := "e2e-rc-" + randHex(t)[:8]
			if os.Geteuid() == 0 {
				t.Cleanup(func() { os.RemoveAll("/var/lib/sandbox-run/sessions/" + session) })
			}
			report := filepath.Join(sandboxtest.WorkDir(t), "r.json")
			// As root the caches are shared by all of root's runs: uv's,
			// which no other test uses, gets a .yarnrc (a protected name
			// that no tool reads there), removed afterwards.
			args := []string{"run", "--sandbox", mode, "--workdir", w, "--session", session, "--cache", "uv"}
			if os.Geteuid() == 0 {
				t.Cleanup(func() { os.Remove("/var/lib/sandbox-run/caches/uid-65534/uv/.yarnrc") })
			}
			script := `echo 'export SBX_RC=from-bashrc' > "$HOME/.bashrc" && echo reg=x > "$UV_CACHE_DIR/.yarnrc" &&
				echo w > "$PWD/.bashrc" && echo "$HOME"`
			if mode == "bwrap" { // landlock refuses a present .git, so the repository is bwrap's case
				script += ` && git init -q "$HOME/repo" && git -C "$HOME/repo" config core.fsmonitor "touch /tmp/pwned"`
			}
			r := runEnv(t, env, "", append(args, "--report", report, "--", "sh", "-c", script)...)
			if r.code != 0 {
				t.Fatalf("first run: exit %d %q", r.code, r.stderr)
			}
			home := strings.TrimSpace(r.stdout)
			if mode == "bwrap" {
				if !strings.Contains(r.stderr, "quarantined "+w+"/.bashrc") {
					t.Errorf("control: the workdir's .bashrc was not quarantined: %q", r.stderr)
				}
				b, _ := os.ReadFile(report)
				if !strings.Contains(string(b), "protected names are not held in sessions' homes and shared caches") {
					t.Errorf("the report does not say the session's home is not protected: %s", b)
				}
			}
			if _, err := os.Lstat(filepath.Join(w, ".bashrc")); err == nil {
				t.Errorf("control: the workdir's .bashrc is still there after the run")
			}
			if strings.Contains(r.stderr, home+"/.bashrc") || strings.Contains(r.stderr, "/.yarnrc") {
				t.Errorf("the session's home or cache was neutralised: %q", r.stderr)
			}
			// The next run's interactive shell reads the session's .bashrc.
			r = runEnv(t, env, "", append(args, "--", "sh", "-c",
				`bash -ic 'echo "rc=$SBX_RC"' 2>/dev/null; cat "$UV_CACHE_DIR/.yarnrc"; git -C "$HOME/repo" config core.fsmonitor || echo no-fsmonitor`)...)
			want := "rc=from-bashrc\nreg=x\nno-fsmonitor\n"
			if r.code != 0 || r.stdout != want {
				t.Errorf("second run: exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, want)
			}
			// Control: a --home DIR of the caller's stays protected.
			h := sandboxtest.WorkDir(t)
			r = run(t, "", "run", "--sandbox", mode, "--workdir", w, "--home", h, "--", "sh", "-c", `echo x > "$HOME/.bashrc"`)
			if r.code != 0 {
				t.Fatalf("--home run: exit %d %q", r.code, r.stderr)
			}
			if _, err := os.Lstat(filepath.Join(h, ".bashrc")); err == nil {
				t.Errorf("control: --home %s kept the .bashrc the command wrote (%q)", h, r.stderr)
			}
		})
	}
}

// TestInspectorCLIDashes: the MCP Inspector's CLI, a real client, starts
// sandbox-run over stdio and lists the server's tools whether sandbox-run
// loses its "--" (the Inspector takes the first "--" as its own and
// strips it), gets one (written twice) or never had one; a
// refusal reaches it as a JSON-RPC error naming the reason. Its control
// is the tool list itself: the server answered through the sandbox.
func TestInspectorCLIDashes(t *testing.T) {
	needBwrap(t)
	npm := mcptest.NPMServers(t)
	w := sandboxtest.WorkDir(t)
	server := []string{npm.Node, npm.Everything(), "stdio"}
	inspector := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cli := npm.InspectorCLI()
		c := exec.CommandContext(ctx, npm.Node, append([]string{cli, "--method", "tools/list"}, args...)...)
		c.Dir = filepath.Dir(cli)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	for _, sub := range []string{"mcp", "run"} {
		flags := []string{bin, sub, "--workdir", w, "--read", npm.Dir}
		for _, tt := range []struct {
			name string
			args []string
		}{
			{"-- --: sandbox-run gets one", append(append(append([]string(nil), flags...), "--", "--"), server...)},
			{"the inspector strips --", append(append(append([]string(nil), flags...), "--"), server...)},
			{"no --", append(append([]string(nil), flags...), server...)},
		} {
			t.Run(sub+"/"+tt.name, func(t *testing.T) {
				out, err := inspector(tt.args...)
				if err != nil || !strings.Contains(out, `"name": "echo"`) {
					t.Errorf("inspector %v: %v\n%s", tt.args, err, out)
				}
			})
		}
		t.Run(sub+"/refusal", func(t *testing.T) {
			args := append(append(append([]string(nil), flags...), "--write", w+"/absent"), server...)
			out, err := inspector(args...)
			if err == nil || !strings.Contains(out, "MCP error -32603: sandbox-run: ") || !strings.Contains(out, "--write "+w+"/absent: does not exist") {
				t.Errorf("inspector %v: %v\n%s; want the refusal as an MCP error", args, err, out)
			}
		})
	}
}
