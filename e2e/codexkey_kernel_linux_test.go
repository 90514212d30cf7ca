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

// codexKeyRun is one Codex run inside: its result, the environment it
// held (dumped by the command to a file in the workdir) and every file the
// run left in the workdir, CODEX_HOME's sessions and logs included.
type codexKeyRun struct {
	result
	env   string
	files map[string]string
}

// runCodexInside runs `codex exec PROMPT` inside with CODEX_HOME in a
// fresh workdir, the host's /etc/hosts naming api.openai.com the test
// host, and extra flags before the command.
func runCodexInside(t *testing.T, codex string, h *sandboxtest.TLSTestHost, env []string, prompt string, extra ...string) codexKeyRun {
	t.Helper()
	w := sandboxtest.WorkDir(t)
	home := filepath.Join(w, ".codex-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(codexConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Chown(t, home)
	sandboxtest.Chown(t, filepath.Join(home, "config.toml"))
	script := `env > "$PWD/env.txt"; tr '\000' '\n' </proc/self/environ >> "$PWD/env.txt"; ` +
		`"$0" exec --skip-git-repo-check --color never "$1" </dev/null`
	args := append([]string{"run", "--workdir", w, "--read", filepath.Dir(codex), "--env", "CODEX_HOME=" + home,
		"--allow-host", "api.openai.com", "--allow-host", h.Addr.String() + "/32", "--upstream-ca", h.CAFile}, extra...)
	args = append(args, "--", "sh", "-c", script, codex, prompt)
	r := withHostsEnv(t, env, fmt.Sprintf("%s api.openai.com\n", h.Addr), args...)
	run := codexKeyRun{result: r, files: map[string]string{}}
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
	places := map[string]string{"stdout": r.stdout, "stderr": r.stderr, "audit": string(a), "report": string(rep), "environment inside": r.env}
	for p, b := range r.files {
		places[p] = b
	}
	if len(r.files) < 3 {
		t.Errorf("the workdir holds %d files; want env.txt, config.toml and Codex's session at least", len(r.files))
	}
	for what, s := range places {
		if strings.Contains(s, real) {
			t.Errorf("the real key is in %s", what)
		}
	}
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
