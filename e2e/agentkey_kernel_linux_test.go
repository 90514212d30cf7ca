package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// codexConfig is the Codex configuration the test gives it (config.toml in
// CODEX_HOME): a provider that speaks the Responses API at the real
// OpenAI host, authenticated by the key in OPENAI_API_KEY, retrying
// nothing (a refused key fails the run at once).
const codexConfig = `model = "` + fakeResponseModel + `"
model_provider = "openaitest"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.openaitest]
name = "OpenAI (test)"
base_url = "https://api.openai.com/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`

// agentKeyRun is one agent's run inside: its result, the environment it
// held (dumped by the command to a file in the workdir) and every file the
// run left in the workdir, the agent's home (sessions, logs) included.
type agentKeyRun struct {
	result
	env   string
	files map[string]string
}

// runAgentInside runs agent with args inside, in workdir w with HOME at
// w/home, the host side's /etc/hosts naming apiHost the test host h
// (allowed, and its CA the upstream roots), and flags before the
// command. The command first dumps its environment (env and
// /proc/self/environ) to w/env.txt.
func runAgentInside(t *testing.T, w string, h *sandboxtest.TLSTestHost, apiHost string, env, flags []string, agent string, args ...string) agentKeyRun {
	t.Helper()
	home := filepath.Join(w, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Chown(t, home)
	script := `env > "$PWD/env.txt"; tr '\000' '\n' </proc/self/environ >> "$PWD/env.txt"; exec "$@" </dev/null`
	argv := append([]string{"run", "--workdir", w, "--read", filepath.Dir(agent), "--env", "HOME=" + home,
		"--allow-host", apiHost, "--allow-host", h.Addr.String() + "/32", "--upstream-ca", h.CAFile}, flags...)
	argv = append(append(argv, "--", "sh", "-c", script, "sh", agent), args...)
	r := withHostsEnv(t, env, fmt.Sprintf("%s %s\n", h.Addr, apiHost), argv...)
	run := agentKeyRun{result: r, files: map[string]string{}}
	b, _ := os.ReadFile(filepath.Join(w, "env.txt"))
	run.env = string(b)
	filepath.WalkDir(w, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			run.files[p] = string(b)
		}
		return nil
	})
	return run
}

// runCodexInside runs `codex exec PROMPT` inside (runAgentInside) with
// CODEX_HOME in a fresh workdir holding codexConfig, its provider at
// api.openai.com.
func runCodexInside(t *testing.T, codex string, h *sandboxtest.TLSTestHost, env []string, prompt string, flags ...string) agentKeyRun {
	t.Helper()
	w := sandboxtest.WorkDir(t)
	codexHome := filepath.Join(w, ".codex-home")
	if err := os.MkdirAll(codexHome, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Chown(t, codexHome)
	sandboxtest.Chown(t, filepath.Join(codexHome, "config.toml"))
	flags = append([]string{"--env", "CODEX_HOME=" + codexHome}, flags...)
	return runAgentInside(t, w, h, "api.openai.com", env, flags, codex, "exec", "--skip-git-repo-check", "--color", "never", prompt)
}

// secretFree fails t when real is in run's outputs, environment or files,
// or in any of more (name: text).
func secretFree(t *testing.T, real string, run agentKeyRun, more map[string]string) {
	t.Helper()
	places := map[string]string{"stdout": run.stdout, "stderr": run.stderr, "the environment inside": run.env}
	for k, v := range more {
		places[k] = v
	}
	for p, b := range run.files {
		places[p] = b
	}
	for what, s := range places {
		if strings.Contains(s, real) {
			t.Errorf("the real key is in %s", what)
		}
	}
}

// TestCodexLLMKey: the real Codex (the pinned npm package in .cache/codex)
// runs inside with --llm-key-env OPENAI_API_KEY and no key of its own;
// its provider is the real OpenAI host, which the host side maps to a
// fake Responses API over TLS on a test host (its CA given with
// --upstream-ca; inside, Codex trusts the run's CA through SSL_CERT_FILE
// with no flag). The fake answers only the real key. codex exec gets the
// answer; the fake saw the real key in Authorization on every request;
// inside, OPENAI_API_KEY held only a placeholder, and neither the dumped
// environment nor any file the run left holds the real key; the audit has
// a line per LLM request with the model, the status and the tokens the
// response reported, and neither the key nor the prompt. The same with
// the key bound by --secret OPENAI_API_KEY@api.openai.com. Control: the
// same run without --llm-key-env, the placeholder given as the command's
// own value: the fake receives the placeholder, refuses it, and Codex
// fails to authenticate.
func TestCodexLLMKey(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t) // the test host's network namespace and the mount namespace
	codex := codexBinary(t)
	const real = "sk-proj-CODEXreal0123456789abcdefghijklmnopqrstuvwxyzABCD"
	const prompt = "say hi PROMPT-CANARY-7f3a"
	h := sandboxtest.NewTLSTestHost(t, 3)
	fake := &fakeResponsesAPI{key: real, prompt: "PROMPT-CANARY-7f3a"}
	h.ServeTLS(t, 443, fake, "api.openai.com")
	out := sandboxtest.WorkDir(t)
	audit, report := filepath.Join(out, "audit.jsonl"), filepath.Join(out, "report.json")
	env := []string{"OPENAI_API_KEY=" + real}

	r := runCodexInside(t, codex, h, env, prompt, "--llm-key-env", "OPENAI_API_KEY", "--audit", audit, "--report", report)
	if r.code != 0 || !strings.Contains(r.stdout, fakeAnswer) {
		t.Fatalf("codex exec inside: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	ph := regexp.MustCompile(`(?m)^OPENAI_API_KEY=(\S+)$`).FindAllStringSubmatch(r.env, -1)
	if len(ph) != 2 || ph[0][1] != ph[1][1] || ph[0][1] == real || !strings.HasPrefix(ph[0][1], "sk-proj-") || len(ph[0][1]) != len(real) {
		t.Fatalf("inside, OPENAI_API_KEY (env, /proc/self/environ) is %q; want one placeholder of the key's shape\n%s", ph, r.env)
	}
	got := fake.requests()
	if len(got) == 0 {
		t.Fatal("the fake API got no request (untested)")
	}
	for _, q := range got {
		if q.Authorization != "Bearer "+real {
			t.Errorf("the fake API got %s %s with Authorization %q; want the real key on every request", q.Method, q.Path, q.Authorization)
		}
	}
	if !got[0].Prompt {
		t.Errorf("the fake API's first request did not carry the prompt: %+v", got[0])
	}
	a, _ := os.ReadFile(audit)
	rep, _ := os.ReadFile(report)
	if len(r.files) < 3 {
		t.Errorf("the workdir holds %d files; want env.txt, config.toml and Codex's session at least", len(r.files))
	}
	secretFree(t, real, r, map[string]string{"the audit": string(a), "the report": string(rep)})
	if strings.Contains(string(a), "PROMPT-CANARY") {
		t.Errorf("the prompt is in the audit:\n%s", a)
	}
	lines := readAudit(t, audit)
	l := findAudit(lines, map[string]string{"event": "llm_request", "method": "POST", "host": "api.openai.com:443", "path": "/v1/responses"})
	if l == nil || l["model"] != fakeResponseModel || l["status"] != 200.0 || l["input_tokens"] != float64(fakeInputTokens) || l["output_tokens"] != float64(fakeOutputTokens) {
		t.Errorf("the audit's llm_request line is %v; want model %s, status 200, tokens %d/%d:\n%s", l, fakeResponseModel, fakeInputTokens, fakeOutputTokens, a)
	}
	if findAudit(lines, map[string]string{"event": "secret", "decision": "swap", "path": "/v1/responses"}) == nil {
		t.Errorf("the audit has no swap line:\n%s", a)
	}
	var rp struct {
		TLS     struct{ Terminated []string } `json:"tls"`
		Secrets []struct {
			Name, From, By string
			Hosts          []string
		} `json:"secrets"`
	}
	if err := json.Unmarshal(rep, &rp); err != nil || !slices.Contains(rp.TLS.Terminated, "api.openai.com:443") || len(rp.Secrets) != 1 ||
		rp.Secrets[0].Name != "OPENAI_API_KEY" || rp.Secrets[0].From != "env:OPENAI_API_KEY" || rp.Secrets[0].By != "egress proxy" ||
		!slices.Equal(rp.Secrets[0].Hosts, []string{"api.openai.com"}) {
		t.Errorf("the report does not name the terminated host and the key (%v):\n%s", err, rep)
	}

	// The same key bound as a secret to the provider's host: swapped and
	// audited alike.
	n := len(fake.requests())
	audit2 := filepath.Join(out, "audit2.jsonl")
	r = runCodexInside(t, codex, h, env, prompt, "--secret", "OPENAI_API_KEY@api.openai.com", "--audit", audit2)
	got = fake.requests()[n:]
	a2, _ := os.ReadFile(audit2)
	if r.code != 0 || !strings.Contains(r.stdout, fakeAnswer) || len(got) == 0 || got[0].Authorization != "Bearer "+real ||
		strings.Contains(r.env+string(a2), real) || findAudit(readAudit(t, audit2), map[string]string{"event": "llm_request", "status": "200", "model": fakeResponseModel}) == nil {
		t.Errorf("--secret OPENAI_API_KEY@api.openai.com: exit %d, the fake got %+v, audit:\n%s\nstderr: %s", r.code, got, a2, r.stderr)
	}

	// Control: no --llm-key-env; the command holds the placeholder as its
	// own value and a rule terminates the same host. The fake receives
	// the placeholder, and Codex fails to authenticate.
	n = len(fake.requests())
	r = runCodexInside(t, codex, h, env, prompt, "--env", "OPENAI_API_KEY="+ph[0][1], "--allow-http", "POST api.openai.com/v1/**")
	got = fake.requests()[n:]
	if r.code == 0 || strings.Contains(r.stdout, fakeAnswer) || len(got) == 0 || got[0].Authorization != "Bearer "+ph[0][1] {
		t.Fatalf("control: exit %d, stdout %q, the fake got %+v; want the placeholder refused and Codex failing\nstderr: %s", r.code, r.stdout, got, r.stderr)
	}
}

// TestClaudeCodeLLMKeyTLS: the real Claude Code (the pinned npm package in
// .cache/agents) runs inside with --llm-key-env ANTHROPIC_API_KEY and no
// LLM socket: the key is bound to api.anthropic.com, which the host side
// maps to a fake Messages API over TLS on a test host, and Claude Code
// reaches it through the egress proxy, trusting the run's CA with no flag.
// claude -p gets the answer; the fake saw the real key on every request;
// inside, ANTHROPIC_API_KEY held only a placeholder, and neither the
// dumped environment nor any file left in the workdir (HOME included)
// holds the key; the audit has an llm_request line with the model, the
// status and the tokens, and not the key. Control: without --llm-key-env,
// the placeholder as the command's own value and a rule terminating the
// host, the fake receives the placeholder.
func TestClaudeCodeLLMKeyTLS(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t) // the test host's network namespace and the mount namespace
	claude := claudeBinary(t)
	const real = "sk-ant-api03-CLAUDEtls0123456789abcdefghijklmnopqrstuv"
	h := sandboxtest.NewTLSTestHost(t, 3)
	fake := &fakeAnthropic{}
	h.ServeTLS(t, 443, fake, "api.anthropic.com")
	out := sandboxtest.WorkDir(t)
	audit := filepath.Join(out, "audit.jsonl")
	env := []string{"ANTHROPIC_API_KEY=" + real}
	quiet := []string{"--env", "DISABLE_AUTOUPDATER=1", "--env", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "--env", "DISABLE_TELEMETRY=1"}

	r := runAgentInside(t, sandboxtest.WorkDir(t), h, "api.anthropic.com", env, append(quiet, "--llm-key-env", "ANTHROPIC_API_KEY", "--audit", audit),
		claude, "-p", "say done")
	if r.code != 0 || !strings.Contains(r.stdout, "All done.") {
		t.Fatalf("claude -p inside: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	ph := regexp.MustCompile(`(?m)^ANTHROPIC_API_KEY=(\S+)$`).FindAllStringSubmatch(r.env, -1)
	if len(ph) != 2 || ph[0][1] != ph[1][1] || ph[0][1] == real || !strings.HasPrefix(ph[0][1], "sk-ant-api03-") || len(ph[0][1]) != len(real) {
		t.Fatalf("inside, ANTHROPIC_API_KEY (env, /proc/self/environ) is %q; want one placeholder of the key's shape", ph)
	}
	got := fake.got()
	if len(got) == 0 {
		t.Fatal("the fake API got no request (untested)")
	}
	for _, k := range got {
		if k != real+"|" {
			t.Errorf("the fake API got %q; want the real x-api-key on every request", k)
		}
	}
	a, _ := os.ReadFile(audit)
	secretFree(t, real, r, map[string]string{"the audit": string(a)})
	if len(r.files) < 3 {
		t.Errorf("the workdir holds %d files; want env.txt, .claude.json and Claude Code's session at least", len(r.files))
	}
	l := findAudit(readAudit(t, audit), map[string]string{"event": "llm_request", "method": "POST", "host": "api.anthropic.com:443", "status": "200", "output_tokens": "4"})
	if l == nil || l["model"] == nil || l["input_tokens"] != 12.0 {
		t.Errorf("the audit has no llm_request line with the model, status 200 and tokens 12/4:\n%s", a)
	}

	// Control: no --llm-key-env; the command's own placeholder goes out.
	n := len(fake.got())
	r = runAgentInside(t, sandboxtest.WorkDir(t), h, "api.anthropic.com", nil,
		append(quiet, "--env", "ANTHROPIC_API_KEY="+ph[0][1], "--allow-http", "GET,POST api.anthropic.com/**"), claude, "-p", "say done")
	if got := fake.got()[n:]; r.code != 0 || len(got) == 0 || got[0] != ph[0][1]+"|" {
		t.Fatalf("control: exit %d, the fake got %q (stderr %s); want the command's value", r.code, got, r.stderr)
	}
}
