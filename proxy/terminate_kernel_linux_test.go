package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

func certPool(t *testing.T, pemBytes []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("no certificate in PEM")
	}
	return pool
}

// client is an HTTP client that goes through pt (or, with pt nil,
// directly) and trusts roots; h2 asks for HTTP/2.
func client(pt *proxyUnderTest, roots *x509.CertPool, h2 bool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: h2,
	}
	if pt != nil {
		tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy"})
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", pt.sock)
		}
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

func do(t *testing.T, c *http.Client, method, u string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// rawTLS sends one HTTP/1.1 request with the request target written
// exactly as given, through a CONNECT to target, trusting roots.
func rawTLS(t *testing.T, pt *proxyUnderTest, target, host, method, uri string, roots *x509.CertPool) (*http.Response, string) {
	t.Helper()
	resp, body, br, c := pt.connect(t, target)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %d %s", target, resp.StatusCode, body)
	}
	tc := tls.Client(&prefixConn{Conn: c, r: br}, &tls.Config{RootCAs: roots, ServerName: strings.Split(target, ":")[0], NextProtos: []string{"http/1.1"}})
	fmt.Fprintf(tc, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", method, uri, host)
	r, err := http.ReadResponse(bufio.NewReader(tc), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, uri, err)
	}
	b, _ := io.ReadAll(r.Body)
	return r, string(b)
}

// TestTerminate: a host named by an --allow-http rule is terminated with
// the run's CA; its requests are judged by method and canonical path, and
// forwarded over a verified connection; every other host stays a tunnel.
// Each refused case has its control: the upstream serves the same request
// when it is sent directly.
func TestTerminate(t *testing.T) {
	h := sandboxtest.NewTLSTestHost(t, 0)
	hostCA := certPool(t, h.CAPEM)
	ruled, tunnelled, untrusted := h.HTTPS.String(), h.HTTPS2.String(), h.Untrusted.String()
	audit := &sandboxtest.SyncBuffer{}
	rule := "GET,HEAD " + ruled + "/repos/**"
	pt := startProxy(t, Config{
		Allow:         []string{tunnelled},
		HTTPRules:     []string{rule, "GET " + untrusted + "/**"},
		UpstreamRoots: hostCA,
		Audit:         audit,
	})
	runCA := certPool(t, pt.p.CACertificatePEM())
	direct := client(nil, hostCA, true)

	// Positive controls: the upstream serves every path the rules refuse.
	for _, c := range []struct{ method, path string }{{"POST", "/repos/o/r"}, {"GET", "/admin"}, {"GET", "/repos/%2e%2e/admin"}, {"GET", "//admin"}} {
		if resp, body := do(t, direct, c.method, "https://"+ruled+c.path); resp.StatusCode != 200 {
			t.Fatalf("control: direct %s %s = %d %q", c.method, c.path, resp.StatusCode, body)
		}
	}

	t.Run("GET allowed over HTTP/1.1 and HTTP/2 end to end", func(t *testing.T) {
		for _, h2 := range []bool{false, true} {
			resp, body := do(t, client(pt, runCA, h2), "GET", "https://"+ruled+"/repos/o/r?x=1")
			want := "HTTP/1.1"
			if h2 {
				want = "HTTP/2.0"
			}
			// The upstream is asked for the client's protocol too.
			if resp.StatusCode != 200 || resp.Proto != want || body != "served GET /repos/o/r?x=1 "+want {
				t.Errorf("h2=%v: %d %s %q, want 200 over %s both sides", h2, resp.StatusCode, resp.Proto, body, want)
			}
		}
	})

	t.Run("the client sees the run CA, not the host's", func(t *testing.T) {
		_, err := client(pt, hostCA, false).Get("https://" + ruled + "/repos/o")
		var uae *tls.CertificateVerificationError
		if err == nil || !errors.As(err, &uae) {
			t.Fatalf("client trusting only the host's CA: %v, want a verification error", err)
		}
		// Control: a host without rules is a tunnel, so the host's CA is
		// what the client sees there.
		if resp, body := do(t, client(pt, hostCA, true), "GET", "https://"+tunnelled+"/anything"); resp.StatusCode != 200 {
			t.Fatalf("tunnel: %d %q", resp.StatusCode, body)
		}
		if _, err := client(pt, runCA, false).Get("https://" + tunnelled + "/anything"); err == nil {
			t.Fatal("tunnelled host verified with the run CA: it was terminated")
		}
	})

	t.Run("POST refused with the rule named", func(t *testing.T) {
		resp, body := do(t, client(pt, runCA, true), "POST", "https://"+ruled+"/repos/o/r/issues")
		if resp.StatusCode != 403 || resp.Header.Get(RefusalHeader) != reasonHTTPRule ||
			!strings.Contains(body, "--allow-http 'POST "+ruled+"/repos/o/r/issues'") || !strings.Contains(body, rule) {
			t.Fatalf("POST: %d %q", resp.StatusCode, body)
		}
		if h.Received(h.HTTPS.Port(), "POST", "/repos/o/r/issues") {
			t.Fatal("the refused POST reached the upstream")
		}
	})

	t.Run("paths outside the rule and spelling tricks refused", func(t *testing.T) {
		for _, uri := range []string{"/admin", "/repos/%2e%2e/admin", "//admin", "/repos/../admin", "/repos/%2E%2E/admin", "/repos%2F..%2Fadmin", "/repos/..%5cadmin"} {
			resp, body := rawTLS(t, pt, ruled, ruled, "GET", uri, runCA)
			if resp.StatusCode != 403 {
				t.Errorf("GET %s: %d %q, want 403", uri, resp.StatusCode, body)
			}
		}
		for _, r := range h.Requests() {
			if r.Port == h.HTTPS.Port() && strings.Contains(r.URI, "admin") && r.Method == "GET" && r.URI != "/admin" && r.URI != "/repos/%2e%2e/admin" && r.URI != "//admin" {
				t.Errorf("upstream received %s", r)
			}
		}
		// Control, and what is judged is forwarded: a path that
		// normalises into the rule is sent in its canonical form.
		resp, body := rawTLS(t, pt, ruled, ruled, "GET", "/repos//o/./x/../r", runCA)
		if resp.StatusCode != 200 || body != "served GET /repos/o/r HTTP/1.1" {
			t.Fatalf("GET /repos//o/./x/../r: %d %q, want the canonical /repos/o/r served", resp.StatusCode, body)
		}
	})

	t.Run("Host other than the CONNECT target refused", func(t *testing.T) {
		resp, body := rawTLS(t, pt, ruled, tunnelled, "GET", "/repos/o", runCA)
		if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get(RefusalHeader) != reasonHostMismatch {
			t.Fatalf("Host mismatch: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("an upstream with an untrusted certificate is refused", func(t *testing.T) {
		// Control: the upstream answers when its certificate is not checked.
		insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second}
		if resp, err := insecure.Get("https://" + untrusted + "/x"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("control: direct unverified GET: %v", err)
		}
		n := len(h.Requests())
		resp, body := do(t, client(pt, runCA, false), "GET", "https://"+untrusted+"/x")
		if resp.StatusCode != 502 || resp.Header.Get(RefusalHeader) != reasonUnverified || !strings.Contains(body, "--upstream-ca") {
			t.Fatalf("untrusted upstream: %d %q", resp.StatusCode, body)
		}
		if len(h.Requests()) != n {
			t.Fatalf("the request reached the unverified upstream: %v", h.Requests()[n:])
		}
	})

	t.Run("audit has one http_request line per decision", func(t *testing.T) {
		var allow, refuse int
		for line := range strings.SplitSeq(audit.String(), "\n") {
			var l l7AuditLine
			if json.Unmarshal([]byte(line), &l) != nil || l.Event != "http_request" {
				continue
			}
			if l.Host != h.Addr.String() || l.Method == "" || l.Path == "" {
				t.Errorf("audit line %s", line)
			}
			switch l.Decision {
			case "allow":
				allow++
				if l.Port == int(h.HTTPS.Port()) && l.Rule != rule {
					t.Errorf("allowed without its rule: %s", line)
				}
			case "refuse":
				refuse++
			}
		}
		if allow < 3 || refuse < 9 {
			t.Errorf("audit: %d allowed, %d refused http_request lines:\n%s", allow, refuse, audit.String())
		}
	})
}

// TestTerminateSystemRoots: without UpstreamRoots the upstream is checked
// against the system roots, which do not hold the test host's CA.
func TestTerminateSystemRoots(t *testing.T) {
	h := sandboxtest.NewTLSTestHost(t, 1)
	pt := startProxy(t, Config{HTTPRules: []string{"GET " + h.HTTPS.String() + "/**"}})
	resp, body := do(t, client(pt, certPool(t, pt.p.CACertificatePEM()), true), "GET", "https://"+h.HTTPS.String()+"/x")
	if resp.StatusCode != 502 || resp.Header.Get(RefusalHeader) != reasonUnverified {
		t.Fatalf("system roots: %d %q", resp.StatusCode, body)
	}
	// Control: the same proxy with the host's CA as upstream roots.
	pt2 := startProxy(t, Config{HTTPRules: []string{"GET " + h.HTTPS.String() + "/**"}, UpstreamRoots: certPool(t, h.CAPEM)})
	if resp, body := do(t, client(pt2, certPool(t, pt2.p.CACertificatePEM()), true), "GET", "https://"+h.HTTPS.String()+"/x"); resp.StatusCode != 200 {
		t.Fatalf("control: %d %q", resp.StatusCode, body)
	}
}

// TestRequestHook: the hook sees allowed terminated requests only, may
// change them, and refuses with its error.
func TestRequestHook(t *testing.T) {
	h := sandboxtest.NewTLSTestHost(t, 2)
	var seen []string
	hook := func(r *http.Request, host string) error {
		seen = append(seen, r.Method+" "+host+" "+r.URL.String())
		if r.URL.Path == "/repos/deny" {
			return fmt.Errorf("hook says no")
		}
		r.URL.RawQuery = "hooked=1"
		return nil
	}
	pt := startProxy(t, Config{HTTPRules: []string{"GET " + h.HTTPS.String() + "/repos/**"}, UpstreamRoots: certPool(t, h.CAPEM), RequestHook: hook})
	c := client(pt, certPool(t, pt.p.CACertificatePEM()), false)
	if resp, body := do(t, c, "GET", "https://"+h.HTTPS.String()+"/repos/a"); resp.StatusCode != 200 || body != "served GET /repos/a?hooked=1 HTTP/1.1" {
		t.Fatalf("hooked GET: %d %q", resp.StatusCode, body)
	}
	if resp, body := do(t, c, "GET", "https://"+h.HTTPS.String()+"/repos/deny"); resp.StatusCode != 403 || !strings.Contains(body, "hook says no") {
		t.Fatalf("hook refusal: %d %q", resp.StatusCode, body)
	}
	if resp, _ := do(t, c, "POST", "https://"+h.HTTPS.String()+"/repos/a"); resp.StatusCode != 403 {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	want := "GET " + h.Addr.String() + " https://" + h.HTTPS.String() + "/repos/a"
	if len(seen) != 2 || seen[0] != want {
		t.Fatalf("hook saw %q, want [%q, .../repos/deny] (not the refused POST)", seen, want)
	}
}
