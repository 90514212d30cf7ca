package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

const e2eSecret = "ghp_E2Ereal0123456789abcdefghijklmnopqrs"

// TestSecretInSandbox: --secret GH@HOST:PORT in a bwrap run. Inside, $GH
// (in env and /proc/self/environ) is a placeholder of the token's shape;
// curl's Bearer reaches the bound host with the real token, over the
// run's CA; a terminated host the secret is not bound to and plain HTTP
// are refused (403) and the host receives nothing (controls: the same
// requests without the placeholder are answered); a host that is allowed
// but not terminated (a tunnel) receives the placeholder unchanged; git
// over HTTPS with the credential helper delivers the token as Basic
// credentials to the smart-HTTP host. The real value is in no output, audit or report.
// Control: the same run without --secret delivers the placeholder-shaped
// value as the command sent it.
func TestSecretInSandbox(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t) // the test host lives in a network namespace only root can wire up
	h := sandboxtest.NewTLSTestHost(t, 3)
	bound, other, plain, tunnel := h.HTTPS.String(), h.HTTPS2.String(), h.Plain.String(), h.Untrusted.String()
	w := sandboxtest.WorkDir(t)
	out := sandboxtest.WorkDir(t)
	audit, report := filepath.Join(out, "audit.jsonl"), filepath.Join(out, "report.json")
	script := fmt.Sprintf(`echo "PH=$GH"
env | grep -c '^GH='
cat /proc/self/environ | tr '\000' '\n' | grep '^GH='
curl -sS -m 10 -H "Authorization: Bearer $GH" https://%[1]s/a; echo
echo other=$(curl -s -m 10 -o /dev/null -w '%%{http_code}' -H "X-Token: $GH" https://%[2]s/b)
echo plain=$(curl -s -m 10 -o /dev/null -w '%%{http_code}' -H "X-Token: $GH" http://%[3]s/p)
echo other-control=$(curl -s -m 10 -o /dev/null -w '%%{http_code}' -H "X-Token: none" https://%[2]s/b-control)
echo plain-control=$(curl -s -m 10 -o /dev/null -w '%%{http_code}' -H "X-Token: none" http://%[3]s/p-control)
echo tunnel=$(curl -sk -m 10 -o /dev/null -w '%%{http_code}' -H "Authorization: Bearer $GH" https://%[4]s/t)
git clone -q https://%[1]s/auth/git/repo /tmp/clone && echo cloned
`, bound, other, plain, tunnel)
	common := []string{"--allow-host", bound, "--allow-host", other, "--allow-host", plain, "--allow-host", tunnel,
		"--allow-http", "GET,POST " + other + "/**", "--upstream-ca", h.CAFile}
	args := append([]string{"run", "--workdir", w, "--secret", "GH@" + bound, "--audit", audit, "--report", report}, common...)
	r := runEnv(t, []string{"GH=" + e2eSecret}, "", append(args, "--", "sh", "-c", script)...)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	ph := regexp.MustCompile(`PH=(\S+)`).FindStringSubmatch(r.stdout)
	if ph == nil || ph[1] == e2eSecret || len(ph[1]) != len(e2eSecret) || !strings.HasPrefix(ph[1], "ghp_") {
		t.Fatalf("inside, $GH is %q; want a placeholder of the token's shape", ph)
	}
	for _, want := range []string{"\n1\n", "GH=" + ph[1] + "\n", "served GET /a HTTP/2.0", "other=403", "plain=403", "other-control=200", "plain-control=200", "tunnel=200", "cloned"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr: %s", want, r.stdout, r.stderr)
		}
	}
	var gotA, gotGit, gotTunnel bool
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+e2eSecret))
	for _, req := range h.Requests() {
		switch {
		case req.Port == h.HTTPS.Port() && req.URI == "/a":
			gotA = req.Authorization == "Bearer "+e2eSecret
		case req.Port == h.HTTPS.Port() && strings.HasPrefix(req.URI, "/auth/git/") && req.Authorization == basic:
			gotGit = true
		case req.Port == h.Untrusted.Port() && req.URI == "/t":
			gotTunnel = req.Authorization == "Bearer "+ph[1]
		case req.Port != h.HTTPS.Port() && !strings.HasSuffix(req.URI, "-control"):
			t.Errorf("a refused request reached the host: %s", req)
		}
	}
	if !gotA || !gotGit || !gotTunnel {
		t.Errorf("the bound host got the real token: Bearer %v, git Basic %v; the tunnelled host got the placeholder unchanged: %v; requests %v", gotA, gotGit, gotTunnel, h.Requests())
	}
	a, _ := os.ReadFile(audit)
	rep, _ := os.ReadFile(report)
	for what, s := range map[string]string{"stdout": r.stdout, "stderr": r.stderr, "audit": string(a), "report": string(rep)} {
		if strings.Contains(s, e2eSecret) {
			t.Errorf("the real value is in the %s", what)
		}
	}
	for _, want := range []string{`"event":"secret"`, `"decision":"swap"`, `"reason":"secret-elsewhere"`, `"reason":"secret-plaintext"`} {
		if !strings.Contains(string(a), want) {
			t.Errorf("audit lacks %s:\n%s", want, a)
		}
	}
	if !strings.Contains(string(rep), `"name": "GH"`) || !strings.Contains(string(rep), `"from": "env:GH"`) {
		t.Errorf("report does not name the secret:\n%s", rep)
	}
	secretReportAudit(t, rep, readAudit(t, audit), bound, other, plain, tunnel)

	// Control: without --secret (the same value given as a plain
	// variable, the bound host terminated by a rule) the host receives
	// what the command sent.
	n := len(h.Requests())
	args = append([]string{"run", "--workdir", w, "--env", "GH=" + ph[1], "--allow-http", "GET " + bound + "/**"}, common...)
	r = run(t, "", append(args, "--", "sh", "-c", fmt.Sprintf(`curl -sS -m 10 -H "Authorization: Bearer $GH" https://%s/c`, bound))...)
	if got := h.Requests()[n:]; r.code != 0 || len(got) != 1 || got[0].Authorization != "Bearer "+ph[1] {
		t.Fatalf("control: exit %d, host got %v (stderr %s); want the placeholder as sent", r.code, got, r.stderr)
	}
}

// secretReportAudit checks what TestSecretInSandbox's report and audit
// say of its TLS and its secret (issue 37, item 5): the report's
// terminated hosts are exactly the secret's host and the ruled one (the
// plain host and the tunnelled one are not), its rules are the one given, its secret is named
// with its hosts, source and swapper; run_start names the secret; each
// request seen in clear has one http_request line with method, host,
// port, path, rule and outcome: the swapped request allowed as
// terminated (no rule names its host), the ruled host's request refused
// by the secret hook with its rule and a detail naming the secret, the
// plain one refused alike.
func secretReportAudit(t *testing.T, rep []byte, lines []map[string]any, bound, other, plain, tunnel string) {
	t.Helper()
	var r struct {
		TLS struct {
			Terminated, Rules []string
		} `json:"tls"`
		Secrets []struct {
			Name, From, By string
			Hosts          []string
		} `json:"secrets"`
	}
	if err := json.Unmarshal(rep, &r); err != nil {
		t.Fatalf("report: %v", err)
	}
	slices.Sort(r.TLS.Terminated)
	want := []string{bound, other}
	slices.Sort(want)
	if !slices.Equal(r.TLS.Terminated, want) || !slices.Equal(r.TLS.Rules, []string{"GET,POST " + other + "/**"}) {
		t.Errorf("report tls: terminated %q (want %q; %s is plain HTTP, %s a tunnel), rules %q", r.TLS.Terminated, want, plain, tunnel, r.TLS.Rules)
	}
	if len(r.Secrets) != 1 || r.Secrets[0].Name != "GH" || !slices.Equal(r.Secrets[0].Hosts, []string{bound}) || r.Secrets[0].By != "egress proxy" {
		t.Errorf("report secrets: %+v", r.Secrets)
	}
	if l := findAudit(lines, map[string]string{"event": "run_start"}); l == nil || fmt.Sprint(l["secrets"]) != "[GH]" {
		t.Errorf("run_start does not name the secret: %v", l)
	}
	host := func(hp string) string { h, _, _ := net.SplitHostPort(hp); return h }
	port := func(hp string) string { _, p, _ := net.SplitHostPort(hp); return p }
	for _, c := range []struct {
		want   map[string]string
		detail string
	}{
		{map[string]string{"method": "GET", "host": host(bound), "port": port(bound), "path": "/a", "decision": "allow", "reason": "terminated", "rule": "<nil>"}, ""},
		{map[string]string{"method": "GET", "host": host(other), "port": port(other), "path": "/b", "decision": "refuse", "reason": "hook-refused", "rule": "GET,POST " + other + "/**"}, "secret GH"},
		{map[string]string{"method": "GET", "host": host(plain), "port": port(plain), "path": "/p", "decision": "refuse", "reason": "hook-refused"}, "secret GH"},
	} {
		c.want["event"] = "http_request"
		l := findAudit(lines, c.want)
		if l == nil || !strings.Contains(fmt.Sprint(l["detail"]), c.detail) {
			t.Errorf("audit has no http_request line %v with detail %q: %v", c.want, c.detail, l)
		}
	}
}

// TestLLMKeyInSandbox: --llm-key-env ANTHROPIC_API_KEY with an LLM
// socket. Inside, ANTHROPIC_API_KEY is a placeholder and the command's
// request over the LLM channel reaches the fake provider with the real
// key in x-api-key; the audit names the model and tokens, not the key or
// the prompt. Control: without --llm-key-env the provider sees the value
// the command sent.
func TestLLMKeyInSandbox(t *testing.T) {
	needBwrap(t)
	const real = "sk-ant-api03-E2Ereal0123456789abcdefghijklmnopqrstuv"
	dir := sandboxtest.WorkDir(t)
	sock := filepath.Join(dir, "llm.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var keys []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"message","usage":{"input_tokens":11,"output_tokens":5}}`)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	chownSocket(t, sock)
	w := sandboxtest.WorkDir(t)
	audit := filepath.Join(dir, "audit.jsonl")
	script := `echo "K=$ANTHROPIC_API_KEY"; curl -sS -m 10 -H "x-api-key: $ANTHROPIC_API_KEY" -H 'anthropic-version: 2023-06-01' -d '{"model":"claude-test","messages":[{"role":"user","content":"PROMPT-TEXT"}]}' "$ANTHROPIC_BASE_URL/v1/messages"`
	r := runEnv(t, []string{"ANTHROPIC_API_KEY=" + real}, "", "run", "--workdir", w, "--llm-socket", sock, "--llm-env", "ANTHROPIC_BASE_URL",
		"--llm-key-env", "ANTHROPIC_API_KEY", "--audit", audit, "--", "sh", "-c", script)
	k := regexp.MustCompile(`K=(\S+)`).FindStringSubmatch(r.stdout)
	if r.code != 0 || k == nil || k[1] == real || !strings.HasPrefix(k[1], "sk-ant-api03-") || len(k[1]) != len(real) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want a placeholder inside", r.code, r.stdout, r.stderr)
	}
	mu.Lock()
	got := append([]string(nil), keys...)
	mu.Unlock()
	if len(got) != 1 || got[0] != real {
		t.Fatalf("the provider got x-api-key %q; want the real key once", got)
	}
	a, _ := os.ReadFile(audit)
	for what, s := range map[string]string{"stdout": r.stdout, "stderr": r.stderr, "audit": string(a)} {
		if strings.Contains(s, real) || strings.Contains(s, "PROMPT-TEXT") && what == "audit" {
			t.Errorf("the key or the prompt is in the %s", what)
		}
	}
	if !strings.Contains(string(a), `"model":"claude-test"`) || !strings.Contains(string(a), `"input_tokens":11`) {
		t.Errorf("audit lacks the model or the tokens:\n%s", a)
	}
	// Control: without --llm-key-env the provider sees what was sent.
	r = runEnv(t, []string{"ANTHROPIC_API_KEY=" + real}, "", "run", "--workdir", w, "--llm-socket", sock, "--llm-env", "ANTHROPIC_BASE_URL",
		"--env", "ANTHROPIC_API_KEY="+k[1], "--", "sh", "-c", script)
	mu.Lock()
	got = append([]string(nil), keys...)
	mu.Unlock()
	if r.code != 0 || len(got) != 2 || got[1] != k[1] {
		t.Fatalf("control: exit %d, provider got %q (stderr %s); want the placeholder as sent", r.code, got, r.stderr)
	}
}

// fakeAnthropic answers Claude Code's Messages API requests on a Unix
// socket (the node's LLM proxy side of the channel) with a short text,
// as JSON or as server-sent events, and records each request's
// x-api-key and Authorization.
type fakeAnthropic struct {
	mu   sync.Mutex
	keys []string
}

func (f *fakeAnthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.keys = append(f.keys, r.Header.Get("X-Api-Key")+"|"+r.Header.Get("Authorization"))
	f.mu.Unlock()
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	switch {
	case strings.HasSuffix(r.URL.Path, "/count_tokens"):
		fmt.Fprint(w, `{"input_tokens":10}`)
		return
	case !strings.HasPrefix(r.URL.Path, "/v1/messages"):
		http.NotFound(w, r)
		return
	}
	msg := `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[%s],"stop_reason":%s,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":%d}}`
	if !strings.Contains(string(body), `"stream":true`) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, msg, `{"type":"text","text":"All done."}`, `"end_turn"`, 4)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(name, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data) }
	ev("message_start", `{"type":"message_start","message":`+fmt.Sprintf(msg, "", "null", 1)+`}`)
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"All done."}}`)
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":4}}`)
	ev("message_stop", `{"type":"message_stop"}`)
}

func (f *fakeAnthropic) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...)
}

// TestClaudeCodeLLMKey: the real Claude Code (the pinned npm package in
// .cache/agents) runs inside with ANTHROPIC_API_KEY a placeholder and
// ANTHROPIC_BASE_URL the LLM channel; claude -p gets its answer, and the
// fake API outside receives the real key on every request. The key is in
// no output and no audit line. Control: without --llm-key-env the fake
// API receives the placeholder the command holds.
func TestClaudeCodeLLMKey(t *testing.T) {
	needBwrap(t)
	root, _ := filepath.Abs("..")
	m, _ := filepath.Glob(filepath.Join(root, ".cache/agents/node_modules/@anthropic-ai/claude-code-linux-*/claude"))
	if len(m) == 0 {
		sandboxtest.Unavailable(t, "Claude Code", "run scripts/install-mcp-servers.sh (it installs .cache/agents)")
		return
	}
	claude, _ := filepath.EvalSymlinks(m[0])
	const real = "sk-ant-api03-CLAUDEreal0123456789abcdefghijklmnopqrstu"
	dir := sandboxtest.WorkDir(t)
	sock := filepath.Join(dir, "llm.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeAnthropic{}
	srv := &http.Server{Handler: fake}
	go srv.Serve(ln)
	defer srv.Close()
	chownSocket(t, sock)
	w := sandboxtest.WorkDir(t)
	audit := filepath.Join(dir, "audit.jsonl")
	common := []string{"run", "--workdir", w, "--read", filepath.Dir(claude), "--llm-socket", sock, "--llm-env", "ANTHROPIC_BASE_URL",
		"--env", "DISABLE_AUTOUPDATER=1", "--env", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "--env", "DISABLE_TELEMETRY=1"}
	script := `env | grep -c "^ANTHROPIC_API_KEY=sk-ant-api03-"; "$0" -p "say done" </dev/null`
	r := runEnv(t, []string{"ANTHROPIC_API_KEY=" + real}, "", append(common, "--llm-key-env", "ANTHROPIC_API_KEY", "--audit", audit, "--", "sh", "-c", script, claude)...)
	if r.code != 0 || !strings.Contains(r.stdout, "All done.") {
		t.Fatalf("claude -p inside: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	got := fake.got()
	sawMessages := false
	for _, k := range got {
		if k != real+"|" {
			t.Errorf("the fake API got %q; want the real x-api-key on every request", k)
		}
		sawMessages = true
	}
	if !sawMessages {
		t.Fatal("the fake API got no request (untested)")
	}
	a, _ := os.ReadFile(audit)
	if strings.Contains(r.stdout+r.stderr+string(a), real) || !strings.Contains(string(a), `"llm_request"`) {
		t.Errorf("the key is in an output or the audit has no llm_request line:\n%s", a)
	}
	// Control: without --llm-key-env the command's own value goes out.
	n := len(fake.got())
	ph := "sk-ant-api03-PLACEHOLDERonly0123456789abcdefghijklmnopq"
	r = runEnv(t, nil, "", append(common, "--env", "ANTHROPIC_API_KEY="+ph, "--", "sh", "-c", script, claude)...)
	if got := fake.got()[n:]; r.code != 0 || len(got) == 0 || got[0] != ph+"|" {
		t.Fatalf("control: exit %d, fake got %q (stderr %s); want the command's value", r.code, got, r.stderr)
	}
}
