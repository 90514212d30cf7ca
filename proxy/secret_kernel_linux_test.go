package proxy

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/proxy/secret"
)

const secretReal = "ghp_REALtoken0123456789abcdefghijklmnopq"

// secretProxy starts a proxy in front of h that allows testhost.test (a
// name for h's address) on its HTTPS, HTTPS2 and Plain ports; with set,
// the set's hosts are terminated and its hooks installed, and h's
// address on HTTPS is terminated by a rule (a terminated host the secret
// is not bound to). It returns the proxy and its audit.
func secretProxy(t *testing.T, h *sandboxtest.TLSTestHost, set *secret.Set, record func(secret.Decision, string, string, string)) (*proxyUnderTest, *sandboxtest.SyncBuffer) {
	t.Helper()
	audit := &sandboxtest.SyncBuffer{}
	cfg := Config{
		Allow: []string{h.HTTPS.String(), h.HTTPS2.String(), h.Plain.String(), "testhost.test:" + strconv.Itoa(int(h.HTTPS.Port())),
			"testhost.test:" + strconv.Itoa(int(h.HTTPS2.Port())), "testhost.test:" + strconv.Itoa(int(h.Plain.Port()))},
		Resolver:      newResolver(map[string][]string{"testhost.test": {h.Addr.String()}}),
		UpstreamRoots: certPool(t, h.CAPEM),
		Audit:         audit,
	}
	if set != nil {
		cfg.TerminateHosts = set.Hosts()
		cfg.HTTPRules = []string{"GET,POST " + h.HTTPS.String() + "/**"}
		cfg.RequestHook = set.RequestHook(true, record)
		cfg.PlainRequestHook = set.RequestHook(false, record)
		cfg.ResponseHook = set.ResponseHook()
	}
	return startProxy(t, cfg), audit
}

func send(t *testing.T, c *http.Client, method, u string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), resp.Header
}

// authAt lists the Authorization headers h received on port.
func authAt(h *sandboxtest.TLSTestHost, port uint16) []string {
	var out []string
	for _, r := range h.Requests() {
		if r.Port == port {
			out = append(out, r.Authorization)
		}
	}
	return out
}

// TestSecretSwap: a secret bound to testhost.test:HTTPS reaches that host
// only, only over TLS: the proxy swaps the placeholder there; a
// terminated host it is not bound to and plain HTTP are refused and
// audited (the host receives nothing); a host the proxy tunnels receives
// the placeholder unchanged. The real value is in no audit line, no
// response and no refusal. Control: without the secret the bound host
// receives the placeholder.
func TestSecretSwap(t *testing.T) {
	h := sandboxtest.NewTLSTestHost(t, 3)
	bound := "testhost.test:" + strconv.Itoa(int(h.HTTPS.Port()))
	set, err := secret.New([]secret.Spec{{Name: "GH", Value: secretReal, Hosts: []string{bound}}})
	if err != nil {
		t.Fatal(err)
	}
	ph, _ := set.Placeholder("GH")
	var mu sync.Mutex
	var records []string
	record := func(d secret.Decision, method, host, path string) {
		mu.Lock()
		defer mu.Unlock()
		r := method + " " + host + path + " swapped=" + strings.Join(d.Swapped, ",")
		if d.Refused != nil {
			r += " refused=" + d.Refused.Reason
		}
		records = append(records, r)
	}
	pt, audit := secretProxy(t, h, set, record)
	runCA := certPool(t, pt.p.CACertificatePEM())
	c := client(pt, runCA, false)
	var outputs strings.Builder

	// Its host, over TLS: the real value arrives.
	st, body, _ := send(t, c, "GET", "https://"+bound+"/api?x=1", "Authorization", "Bearer "+ph)
	outputs.WriteString(body)
	if got := authAt(h, h.HTTPS.Port()); st != 200 || len(got) != 1 || got[0] != "Bearer "+secretReal {
		t.Fatalf("bound host: %d, it received %q; want the real value once", st, got)
	}
	// A terminated host it is not bound to: refused, nothing arrives.
	n := len(h.Requests())
	st, body, hdr := send(t, c, "GET", "https://"+h.HTTPS.String()+"/x", "X-Token", ph)
	outputs.WriteString(body)
	if st != 403 || hdr.Get(RefusalHeader) != reasonHook || !strings.Contains(body, "secret GH") || len(h.Requests()) != n {
		t.Fatalf("other terminated host: %d %q; host got %v", st, body, h.Requests()[n:])
	}
	// Plain HTTP to its host's name: refused, nothing arrives.
	plain := client(pt, nil, false)
	st, body, _ = send(t, plain, "GET", "http://testhost.test:"+strconv.Itoa(int(h.Plain.Port()))+"/p?t="+ph)
	outputs.WriteString(body)
	if st != 403 || !strings.Contains(body, "plain HTTP") || len(authAt(h, h.Plain.Port())) != 0 {
		t.Fatalf("plain HTTP: %d %q", st, body)
	}
	// Control: plain HTTP without the placeholder goes through.
	if st, body, _ := send(t, plain, "GET", "http://testhost.test:"+strconv.Itoa(int(h.Plain.Port()))+"/p"); st != 200 {
		t.Fatalf("control: plain HTTP without a placeholder: %d %q", st, body)
	}
	// A tunnelled host (not terminated): the placeholder goes unchanged.
	tunnelled := "testhost.test:" + strconv.Itoa(int(h.HTTPS2.Port()))
	st, _, _ = send(t, client(pt, certPool(t, h.CAPEM), false), "GET", "https://"+tunnelled+"/t", "Authorization", "Bearer "+ph)
	if got := authAt(h, h.HTTPS2.Port()); st != 200 || len(got) != 1 || got[0] != "Bearer "+ph {
		t.Fatalf("tunnelled host: %d, received %q; want the placeholder unchanged", st, got)
	}
	// An upstream that echoes the value: the client gets the placeholder.
	// (The test host echoes the request target: a query carries it.)
	st, body, _ = send(t, c, "GET", "https://"+bound+"/echo?access_token="+ph)
	if st != 200 || strings.Contains(body, secretReal) || !strings.Contains(body, ph) {
		t.Fatalf("echo: %d %q; want the real value scrubbed back to the placeholder", st, body)
	}
	if !h.Received(h.HTTPS.Port(), "GET", "access_token="+secretReal) {
		t.Fatal("the query was not swapped at the bound host")
	}
	outputs.WriteString(body + audit.String() + strings.Join(records, "\n"))
	if strings.Contains(outputs.String(), secretReal) {
		t.Fatalf("the real value is in a response, the audit or a record:\n%s", outputs.String())
	}
	for _, want := range []string{`"reason":"hook-refused"`, `refused: the request to ` + h.Addr.String() + ` carries the placeholder of secret GH`} {
		if !strings.Contains(audit.String(), want) {
			t.Errorf("audit lacks %s:\n%s", want, audit.String())
		}
	}
	if len(records) != 4 {
		t.Errorf("records %q: want the two swaps and the two refusals", records)
	}

	// Control: without the secret, the bound host receives the placeholder.
	h2 := len(authAt(h, h.HTTPS.Port()))
	pt0, _ := secretProxy(t, h, nil, nil)
	send(t, client(pt0, certPool(t, h.CAPEM), false), "GET", "https://"+bound+"/c", "Authorization", "Bearer "+ph)
	if got := authAt(h, h.HTTPS.Port()); len(got) != h2+1 || got[h2] != "Bearer "+ph {
		t.Fatalf("control: without the secret the host received %q", got[h2:])
	}
}

// TestSecretGit: git over HTTPS through the proxy with the credential
// helper of secret.GitCredentialConfig sends the placeholder, and the
// smart-HTTP host receives the real token as Basic credentials. Control:
// the same clone through a proxy without the secret delivers the
// placeholder.
func TestSecretGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		sandboxtest.Unavailable(t, "git", "apt-get install git")
	}
	h := sandboxtest.NewTLSTestHost(t, 3)
	bound := "testhost.test:" + strconv.Itoa(int(h.HTTPS.Port()))
	set, err := secret.New([]secret.Spec{{Name: "GH", Value: secretReal, Hosts: []string{bound}}})
	if err != nil {
		t.Fatal(err)
	}
	ph, _ := set.Placeholder("GH")
	want := map[bool]string{true: secretReal, false: ph}
	for _, withSecret := range []bool{true, false} {
		s, roots := set, h.CAPEM
		pt, _ := secretProxy(t, h, nil, nil)
		if withSecret {
			pt, _ = secretProxy(t, h, s, nil)
			roots = pt.p.CACertificatePEM()
		}
		dir := t.TempDir()
		ca := filepath.Join(dir, "ca.pem")
		os.WriteFile(ca, roots, 0o644)
		port := tcpProxy(t, pt)
		env := []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
			"GIT_SSL_CAINFO=" + ca, "https_proxy=http://127.0.0.1:" + port, "GH=" + ph}
		keys, vals := secret.GitCredentialConfig("GH", []string{bound})
		env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(keys)))
		for i := range keys {
			env = append(env, "GIT_CONFIG_KEY_"+strconv.Itoa(i)+"="+keys[i], "GIT_CONFIG_VALUE_"+strconv.Itoa(i)+"="+vals[i])
		}
		n := len(h.Requests())
		cmd := exec.Command("git", "clone", "-q", "https://"+bound+"/auth/git/repo", filepath.Join(dir, "clone"))
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("secret=%v: git clone: %v: %s", withSecret, err, out)
		}
		if strings.Contains(string(out), secretReal) {
			t.Fatalf("git's output holds the real value: %s", out)
		}
		basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+want[withSecret]))
		var got []string
		for _, r := range h.Requests()[n:] {
			got = append(got, r.Authorization)
		}
		if !contains(got, basic) {
			t.Fatalf("secret=%v: the host received Authorization %q; want %q", withSecret, got, basic)
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// tcpProxy serves pt's proxy on a loopback TCP port too (git takes a
// proxy URL, not a socket); it stops with the test.
func tcpProxy(t *testing.T, pt *proxyUnderTest) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); pt.p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return")
		}
	})
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
