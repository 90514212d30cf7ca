package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestLLMKeyWithoutSocket: --llm-key-env ANTHROPIC_API_KEY with no LLM
// socket binds the key as a secret to api.anthropic.com, swapped by the
// terminating proxy. A fake Messages API serves that name on a test host
// (the name is mapped to the host's address in the host side's
// /etc/hosts only, in a mount namespace of the test's own; the fake's
// certificate is of the host's CA, given with --upstream-ca). Inside,
// $ANTHROPIC_API_KEY is a placeholder; curl's request to
// https://api.anthropic.com reaches the fake with the real key; the real
// key is in no output, audit or report. Control: without --llm-key-env,
// the same request through a terminating rule delivers the value the
// command holds, and the real key, though in sandbox-run's environment,
// reaches nobody.
func TestLLMKeyWithoutSocket(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t) // the test host's network namespace and the mount namespace
	const real = "sk-ant-api03-HOSTreal0123456789abcdefghijklmnopqrstuvw"
	h := sandboxtest.NewTLSTestHost(t, 3)
	fake := &fakeAnthropic{}
	h.ServeTLS(t, 443, fake, "api.anthropic.com")
	hosts := fmt.Sprintf("%s api.anthropic.com\n", h.Addr)
	w := sandboxtest.WorkDir(t)
	out := sandboxtest.WorkDir(t)
	audit, report := filepath.Join(out, "audit.jsonl"), filepath.Join(out, "report.json")
	script := `echo "K=$ANTHROPIC_API_KEY"; curl -sS -m 10 https://api.anthropic.com/v1/messages -H "x-api-key: $ANTHROPIC_API_KEY" ` +
		`-H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' -d '{"model":"claude-test","max_tokens":8,"messages":[{"role":"user","content":"PROMPT-TEXT"}]}'`
	// The 198.18.0.0/15 test address is reachable only through an
	// address entry (a name entry is not enough, proxy/doc.go).
	common := []string{"run", "--workdir", w, "--allow-host", "api.anthropic.com", "--allow-host", h.Addr.String() + "/32", "--upstream-ca", h.CAFile}
	env := []string{"ANTHROPIC_API_KEY=" + real}

	r := withHostsEnv(t, env, hosts, append(common, "--llm-key-env", "ANTHROPIC_API_KEY", "--audit", audit, "--report", report, "--", "sh", "-c", script)...)
	k := regexp.MustCompile(`K=(\S+)`).FindStringSubmatch(r.stdout)
	if r.code != 0 || k == nil || k[1] == real || !strings.HasPrefix(k[1], "sk-ant-api03-") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want a placeholder inside", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "All done.") {
		t.Errorf("the fake API's answer did not come back: %q (stderr %s)", r.stdout, r.stderr)
	}
	if got := fake.got(); len(got) != 1 || got[0] != real+"|" {
		t.Fatalf("the fake API got %q; want the real x-api-key once", got)
	}
	a, _ := os.ReadFile(audit)
	rep, _ := os.ReadFile(report)
	for what, s := range map[string]string{"stdout": r.stdout, "stderr": r.stderr, "audit": string(a), "report": string(rep)} {
		if strings.Contains(s, real) {
			t.Errorf("the real key is in the %s", what)
		}
	}
	if !strings.Contains(string(a), `"event":"secret"`) || !strings.Contains(string(a), `"decision":"swap"`) {
		t.Errorf("the audit has no swap line:\n%s", a)
	}

	// Control: no --llm-key-env, the command holds the placeholder, and a
	// rule terminates the same host: the fake receives what was sent.
	n := len(fake.got())
	r = withHostsEnv(t, env, hosts, append(common, "--env", "ANTHROPIC_API_KEY="+k[1], "--allow-http", "POST api.anthropic.com/v1/**",
		"--", "sh", "-c", script)...)
	if got := fake.got()[n:]; r.code != 0 || len(got) != 1 || got[0] != k[1]+"|" {
		t.Fatalf("control: exit %d, the fake got %q (stdout %s, stderr %s); want the command's value once", r.code, got, r.stdout, r.stderr)
	}
}
