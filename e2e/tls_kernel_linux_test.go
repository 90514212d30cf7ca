package e2e

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// goClient is a Go program that GETs its argument through the
// environment's proxy and trusts what crypto/x509 reads (SSL_CERT_FILE
// and the system bundle); it prints the body or the error.
const goClient = `package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	resp, err := http.Get(os.Args[1])
	if err != nil {
		fmt.Println("ERR", err)
		return
	}
	b, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(b))
}
`

// nodeClient GETs a URL through the proxy on 127.0.0.1:3128 with a
// CONNECT of its own (Node 20's https module reads no proxy variables),
// trusting Node's default CAs plus NODE_EXTRA_CA_CERTS.
const nodeClient = `
const http = require('http'), https = require('https'), net = require('net');
const u = new URL(process.argv[1]);
const req = http.request({host: '127.0.0.1', port: 3128, method: 'CONNECT', path: u.host});
req.on('connect', (res, socket) => {
  if (res.statusCode !== 200) { console.log('ERR connect ' + res.statusCode); return; }
  https.get({socket, servername: net.isIP(u.hostname) ? '' : u.hostname, host: u.hostname, path: u.pathname, agent: false}, r => {
    let b = ''; r.on('data', d => b += d); r.on('end', () => console.log(r.statusCode + ' ' + b));
  }).on('error', e => console.log('ERR ' + e.code));
});
req.on('error', e => console.log('ERR ' + e.code));
req.end();
`

const pyURLLib = `import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
except Exception as e:
    print("ERR", e)
`

const pyRequests = `import sys
try:
    import requests
except ImportError:
    print("NO-REQUESTS"); sys.exit()
try:
    print(requests.get(sys.argv[1], timeout=10).text)
except Exception as e:
    print("ERR", e)
`

// buildGoClient builds goClient into a directory of its own.
func buildGoClient(t *testing.T) string {
	t.Helper()
	dir := sandboxtest.WorkDir(t) // reachable for the sandbox's uid
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(goClient), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "goclient")
	cmd := exec.Command("go", "build", "-o", out, "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GO111MODULE=off", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the Go client: %v: %s", err, b)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// toolScript runs every client against url, one "NAME: output" line each.
func toolScript(url, gobin string) string {
	return fmt.Sprintf(`
one() { tr '\n\t' '  '; }
echo "curl: $(curl -sS -m 10 %[1]s/repos/o/curl 2>&1 | one)"
echo "curl-system-bundle: $(env -u CURL_CA_BUNDLE -u SSL_CERT_FILE curl -sS -m 10 %[1]s/repos/o/sys 2>&1 | one)"
echo "python-urllib: $(python3 -c '%[3]s' %[1]s/repos/o/urllib 2>&1 | one)"
echo "python-requests: $(python3 -c '%[4]s' %[1]s/repos/o/requests 2>&1 | one)"
echo "node: $(node -e "$NODE_CLIENT" %[1]s/repos/o/node 2>&1 | one)"
echo "go: $(%[2]s/goclient %[1]s/repos/o/go 2>&1 | one)"
echo "git: $(git ls-remote %[1]s/git/repo 2>&1 | one)"
rm -rf /tmp/pipt
echo "pip: $(python3 -m pip install --no-deps --no-cache-dir --disable-pip-version-check --retries 0 --timeout 10 --target /tmp/pipt \
  --index-url %[1]s/simple %[5]s >/tmp/pip.log 2>&1 && cat /tmp/pipt/%[5]s/__init__.py | one || tail -n 3 /tmp/pip.log | one)"
`, url, gobin, pyURLLib, pyRequests, wheelName)
}

func toolLines(out string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
			m[k] = v
		}
	}
	return m
}

// TestTLSRulesThroughSandbox: tools inside trust the run's CA with no
// flags for a host an --allow-http rule names, and its rules hold.
func TestTLSRulesThroughSandbox(t *testing.T) {
	needBwrap(t)
	tlsRules(t, 0)
}

// TestTLSRulesThroughGvisor: the same under tier 2.
func TestTLSRulesThroughGvisor(t *testing.T) {
	sandboxtest.Runsc(t)
	tlsRules(t, 1, "--sandbox", "gvisor")
}

func tlsRules(t *testing.T, idx int, mode ...string) {
	sandboxtest.Root(t)
	h := sandboxtest.NewTLSTestHost(t, idx)
	gobin := buildGoClient(t)
	w := sandboxtest.WorkDir(t)
	out := sandboxtest.WorkDir(t)
	audit, report := filepath.Join(out, "audit.jsonl"), filepath.Join(out, "report.json")
	ruled, tunnelled, untrusted := h.HTTPS.String(), h.HTTPS2.String(), h.Untrusted.String()
	rule := "GET,HEAD " + ruled + "/repos/**"
	args := append([]string{
		"--allow-http", rule, "--allow-http", "GET " + ruled + "/git/repo/info/refs",
		"--allow-http", "POST " + ruled + "/git/repo/git-upload-pack", "--allow-http", "GET " + untrusted + "/**",
		"--allow-http", "GET " + ruled + "/simple/**",
		"--allow-host", tunnelled, "--upstream-ca", h.CAFile, "--read", gobin,
		"--env", "NODE_CLIENT=" + nodeClient, "--audit", audit, "--report", report,
	}, mode...)

	// Positive controls: the upstream serves directly every request the
	// rules refuse below, and its certificate is not one the sandbox's
	// tools trust by themselves (the tunnelled port shows it to them).
	direct := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second}
	for _, u := range []string{"/repos/o/r", "/admin", "/repos/%2e%2e/admin", "//admin"} {
		for _, method := range []string{"GET", "POST"} {
			req, _ := http.NewRequest(method, "https://"+ruled+u, nil)
			if resp, err := direct.Do(req); err != nil || resp.StatusCode != 200 {
				t.Fatalf("control: direct %s %s: %v", method, u, err)
			}
		}
	}
	// The untrusted upstream answers when its certificate is not checked:
	// its refusal below is the verification's.
	if resp, err := direct.Get("https://" + untrusted + "/x"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("control: direct unverified GET %s: %v", untrusted, err)
	}

	h.Handle("/simple/", simpleIndex(t))
	controls := len(h.Requests())

	t.Run("tools trust the run CA with no flags", func(t *testing.T) {
		r := sandboxed(t, w, toolScript("https://"+ruled, gobin), args...)
		got := toolLines(r.stdout)
		for _, tool := range []string{"curl", "curl-system-bundle", "python-urllib", "python-requests", "node", "go"} {
			v := got[tool]
			if tool == "python-requests" && strings.TrimSpace(v) == "NO-REQUESTS" {
				sandboxtest.Unavailable(t, "python3-requests inside", "apt-get install python3-requests (scripts/install-deps.sh)")
				continue
			}
			if !strings.Contains(v, "served GET /repos/o/") {
				t.Errorf("%s through the terminating rule: %q (stderr %s)", tool, v, r.stderr)
			}
		}
		if g := got["git"]; !strings.Contains(g, "refs/heads/main") {
			t.Errorf("git ls-remote through the terminating rules: %q", g)
		}
		if p := got["pip"]; !strings.Contains(p, wheelMark) {
			t.Errorf("pip install from the index through the terminating rule: %q", p)
		}
		if !h.Received(h.HTTPS.Port(), "GET", "/simple/"+wheelName+"/"+wheelFile) {
			t.Errorf("the wheel was not fetched from the index: %v", h.Requests())
		}
		// Control: the same tools against the tunnelled port, where the
		// host's own certificate is what they see, fail verification:
		// what they trust above is the run's CA.
		r = sandboxed(t, w, toolScript("https://"+tunnelled, gobin), args...)
		got = toolLines(r.stdout)
		for tool, v := range got {
			if strings.Contains(v, "served") || strings.Contains(v, "refs/heads") || strings.Contains(v, wheelMark) || v == "" {
				t.Errorf("control: %s trusted the test host's own CA through a tunnel: %q", tool, v)
			}
		}
		if p := got["pip"]; !strings.Contains(strings.ToLower(p), "certificate") {
			t.Errorf("control: pip through a tunnel did not fail certificate verification: %q", p)
		}
		if len(got) != 8 {
			t.Errorf("control: %d tool lines: %q", len(got), r.stdout)
		}
	})

	t.Run("rules", func(t *testing.T) {
		script := fmt.Sprintf(`
for u in /repos/o/r '/repos/%%2e%%2e/admin' //admin /repos/../admin /admin '/repos%%2F..%%2Fadmin'; do
  echo "GET $u $(curl -s --path-as-is -m 10 -o /dev/null -w '%%{http_code}' https://%[1]s$u)"
done
echo "POST $(curl -s -m 10 -X POST -d x https://%[1]s/repos/o/r/issues)"
echo "H2 $(curl -s --http2 -m 10 -o /dev/null -w '%%{http_version}' https://%[1]s/repos/o/h2)"
echo "UNTRUSTED $(curl -s -m 10 -w ' %%{http_code}' https://%[2]s/x)"
`, ruled, untrusted)
		r := sandboxed(t, w, script, args...)
		for _, want := range []string{
			"GET /repos/o/r 200", "GET /repos/%2e%2e/admin 403", "GET //admin 403", "GET /repos/../admin 403", "GET /admin 403", "GET /repos%2F..%2Fadmin 403",
			"POST sandbox-run egress proxy refused POST " + ruled + "/repos/o/r/issues", "--allow-http 'POST " + ruled + "/repos/o/r/issues'",
			"H2 2", "UNTRUSTED sandbox-run egress proxy refused GET " + untrusted + "/x", "upstream-unverified", " 502",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q:\n%s\nstderr: %s", want, r.stdout, r.stderr)
			}
		}
		for _, lr := range h.Requests()[controls:] {
			if (lr.Port == h.HTTPS.Port() && strings.Contains(lr.URI, "admin")) || lr.Method == "POST" && strings.Contains(lr.URI, "issues") {
				t.Errorf("a refused request reached the upstream: %s", lr)
			}
			if lr.Port == h.Untrusted.Port() {
				t.Errorf("a request reached the unverified upstream: %s", lr)
			}
		}
		if !h.Received(h.HTTPS.Port(), "GET", "/repos/o/h2") {
			t.Error("the HTTP/2 request did not reach the upstream")
		}
	})

	t.Run("report and audit", func(t *testing.T) {
		var rep struct {
			TLS *struct {
				Terminated, Rules, Covered []string
				UpstreamRoots              string `json:"upstream_roots"`
			} `json:"tls"`
		}
		b, err := os.ReadFile(report)
		if err != nil || json.Unmarshal(b, &rep) != nil || rep.TLS == nil {
			t.Fatalf("report: %v %s", err, b)
		}
		if !strings.Contains(strings.Join(rep.TLS.Terminated, " "), ruled) || !strings.Contains(strings.Join(rep.TLS.Rules, "\n"), rule) ||
			rep.TLS.UpstreamRoots != h.CAFile || strings.Contains(strings.Join(rep.TLS.Terminated, " "), tunnelled) {
			t.Errorf("report tls: %+v", *rep.TLS)
		}
		a, _ := os.ReadFile(audit)
		for _, want := range []string{
			`"event":"http_request","method":"GET","host":"` + h.Addr.String() + `","port":8443,"path":"/repos/o/r","rule":"` + rule + `","decision":"allow"`,
			`"method":"POST","host":"` + h.Addr.String() + `","port":8443,"path":"/repos/o/r/issues","decision":"refuse","reason":"http-rule","fix":"--allow-http 'POST ` + ruled + `/repos/o/r/issues'"`,
			`"path":"/admin","decision":"refuse","reason":"http-rule"`, `"reason":"ambiguous-path"`, `"reason":"upstream-unverified"`,
		} {
			if !strings.Contains(string(a), want) {
				t.Errorf("audit lacks %s", want)
			}
		}
	})
}

// TestTLSRulesRefusedWhereNotHeld: modes that cannot put the run's CA in
// place refuse --allow-http instead of running without it.
func TestTLSRulesRefusedWhereNotHeld(t *testing.T) {
	w := sandboxtest.WorkDir(t)
	for _, mode := range []string{"landlock", "off"} {
		r := sandboxed(t, w, "true", "--sandbox", mode, "--allow-http", "GET example.com/x")
		oneLine(t, r, "allow-http", "bwrap or gvisor")
	}
	oneLine(t, sandboxed(t, w, "true", "--allow-http", "GET example.com/a b"), "allow-http")
	// Control: the same rule is accepted where it is held (a dry run sets
	// up the proxy and the bundle without running anything).
	needBwrap(t)
	if r := sandboxed(t, w, "true", "--allow-http", "GET example.com/x"); r.code != 0 {
		t.Fatalf("control: bwrap with --allow-http: %d %s", r.code, r.stderr)
	}
}
