package sandboxtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TLSTestHost is a test host (NewTestHost) with further servers in its
// network namespace, run by the test process itself, that log every
// request: HTTPS with certificates of the host's own CA on two ports,
// HTTPS with a certificate of a CA nobody is given on a third, and plain
// HTTP on a fourth. Every server answers any path with 200 and
// "served METHOD REQUEST-URI PROTO", /bytes?n=N with N bytes, and /git/
// with git's smart-HTTP backend for a repository named repo (one commit
// on main); /auth/PATH answers 401 with a Basic challenge unless the
// request has an Authorization header, and then as PATH.
type TLSTestHost struct {
	TestHost
	// CAPEM is the PEM certificate of the host's own CA, which signs the
	// certificates of HTTPS and HTTPS2 (for Addr and testhost.test).
	CAPEM []byte
	// CAFile is CAPEM in a file of the test's temporary directory.
	CAFile string
	// HTTPS and HTTPS2 are the two ports served with the host's CA;
	// Untrusted is served with a certificate no test trusts; Plain is HTTP.
	HTTPS, HTTPS2, Untrusted, Plain netip.AddrPort

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey

	mu     sync.Mutex
	log    []LoggedRequest
	extras map[string]http.Handler // Handle's, by path prefix
}

// LoggedRequest is one request a TLSTestHost server received.
type LoggedRequest struct {
	Port          uint16
	Method        string
	URI           string // the request target as sent
	Proto         string // HTTP/1.1 or HTTP/2.0
	Authorization string
}

func (r LoggedRequest) String() string {
	return fmt.Sprintf(":%d %s %s %s", r.Port, r.Method, r.URI, r.Proto)
}

// Requests returns the requests received so far, in order.
func (h *TLSTestHost) Requests() []LoggedRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]LoggedRequest(nil), h.log...)
}

// Received reports whether a request for method and a request target
// containing uri reached the server on port.
func (h *TLSTestHost) Received(port uint16, method, uri string) bool {
	for _, r := range h.Requests() {
		if r.Port == port && r.Method == method && strings.Contains(r.URI, uri) {
			return true
		}
	}
	return false
}

// NewTLSTestHost starts a TLSTestHost with the test host of idx (see
// NewTestHost); everything is removed in t.Cleanup.
func NewTLSTestHost(t testing.TB, idx int) *TLSTestHost {
	t.Helper()
	h := &TLSTestHost{TestHost: NewTestHost(t, idx)}
	ca, caKey := testCA(t, "sandbox-run test host CA")
	h.ca, h.caKey = ca, caKey
	h.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	h.CAFile = filepath.Join(t.TempDir(), "testhost-ca.pem")
	if err := os.WriteFile(h.CAFile, h.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	rogue, rogueKey := testCA(t, "nobody's CA")
	good := testLeaf(t, ca, caKey, h.Addr)
	bad := testLeaf(t, rogue, rogueKey, h.Addr)
	mux := h.mux(t)
	for _, s := range []struct {
		ap   *netip.AddrPort
		port uint16
		cert *tls.Certificate
	}{{&h.HTTPS, 8443, good}, {&h.HTTPS2, 9443, good}, {&h.Untrusted, 10443, bad}, {&h.Plain, 8081, nil}} {
		*s.ap = netip.AddrPortFrom(h.Addr, s.port)
		ln := listenInNetNS(t, h.Netns, s.ap.String())
		if s.cert != nil {
			ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*s.cert}, NextProtos: []string{"h2", "http/1.1"}})
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	return h
}

// mux answers every path and logs each request first.
func (h *TLSTestHost) mux(t testing.TB) http.Handler {
	git := gitBackend(t)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, port, _ := net.SplitHostPort(r.Context().Value(http.LocalAddrContextKey).(net.Addr).String())
		var p uint16
		fmt.Sscan(port, &p)
		h.mu.Lock()
		h.log = append(h.log, LoggedRequest{Port: p, Method: r.Method, URI: r.RequestURI, Proto: r.Proto, Authorization: r.Header.Get("Authorization")})
		h.mu.Unlock()
		if x := h.extra(r.URL.Path); x != nil {
			x.ServeHTTP(w, r)
			return
		}
		switch {
		case strings.HasPrefix(r.URL.Path, "/auth/") && r.Header.Get("Authorization") == "":
			// /auth/...: the same, behind a Basic challenge (git asks its
			// credential helper only after one).
			w.Header().Set("WWW-Authenticate", `Basic realm="testhost"`)
			w.WriteHeader(http.StatusUnauthorized)
		case strings.HasPrefix(r.URL.Path, "/auth/git/") && git != nil:
			r.URL.Path = strings.TrimPrefix(r.URL.Path, "/auth")
			git.ServeHTTP(w, r)
		case r.URL.Path == "/bytes":
			ServeBytes(w, r)
		case strings.HasPrefix(r.URL.Path, "/git/") && git != nil:
			git.ServeHTTP(w, r)
		default:
			fmt.Fprintf(w, "served %s %s %s", r.Method, r.RequestURI, r.Proto)
		}
	})
}

// Handle has every server of the host answer paths under prefix (which
// ends in "/") with handler instead, after logging the request.
func (h *TLSTestHost) Handle(prefix string, handler http.Handler) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.extras == nil {
		h.extras = map[string]http.Handler{}
	}
	h.extras[prefix] = handler
}

func (h *TLSTestHost) extra(path string) http.Handler {
	h.mu.Lock()
	defer h.mu.Unlock()
	for prefix, x := range h.extras {
		if strings.HasPrefix(path, prefix) {
			return x
		}
	}
	return nil
}

// ServeTLS serves handler over HTTPS on port of the host's address, with
// a certificate for names (and the address) signed by the host's CA, so
// that a test can stand in for a named public API whose name it maps to
// Addr. Requests there are not logged; the handler records what it needs.
// The server is closed in t.Cleanup.
func (h *TLSTestHost) ServeTLS(t testing.TB, port uint16, handler http.Handler, names ...string) {
	t.Helper()
	leaf := testLeaf(t, h.ca, h.caKey, h.Addr, names...)
	ln := listenInNetNS(t, h.Netns, netip.AddrPortFrom(h.Addr, port).String())
	ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*leaf}, NextProtos: []string{"h2", "http/1.1"}})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// gitBackend serves a repository "repo" with one commit through git's
// smart-HTTP CGI, or is nil when git is not installed.
func gitBackend(t testing.TB) http.Handler {
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return nil
	}
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	env := append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1", "HOME="+root)
	for _, args := range [][]string{{"init", "-q", "-b", "main", repo}, {"-C", repo, "commit", "-q", "--allow-empty", "-m", "one"}} {
		cmd := exec.Command("git", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(backend)), "git-http-backend"),
		Root: "/git",
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root},
	}
}

// listenInNetNS opens a TCP listener in the named network namespace: a
// locked thread enters it, listens and goes back to its own namespace
// before it is unlocked; if it cannot go back it stays locked, and the
// runtime discards it with its goroutine. Back, because a locked
// goroutine that ends on the main thread does not end that thread: the
// test process's /proc/self/ns/net then named the test's namespace, and
// a test that compared namespaces with it took the host's for a
// sandbox's. The socket stays in that namespace.
func listenInNetNS(t testing.TB, ns, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer own.Close()
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns %s: %w", ns, err)}
			return
		}
		ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen %s in %s: %v", addr, ns, r.err)
	}
	t.Cleanup(func() { r.ln.Close() })
	return r.ln
}

func testCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

// testLeaf is a server certificate for ip, testhost.test and names.
func testLeaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, ip netip.Addr, names ...string) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip.String()},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{ip.AsSlice()}, DNSNames: append([]string{"testhost.test"}, names...),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
