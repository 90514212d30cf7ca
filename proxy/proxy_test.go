package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/sandbox-run/sandbox-run/allowlist"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// proxyUnderTest is a Proxy serving on a Unix socket, as in production.
type proxyUnderTest struct {
	sock  string
	p     *Proxy
	mu    sync.Mutex
	dials []netip.AddrPort // every address the dialer was about to connect to
}

func startProxy(t *testing.T, cfg Config) *proxyUnderTest {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pt := &proxyUnderTest{p: p}
	p.dialHook = func(ap netip.AddrPort) {
		pt.mu.Lock()
		pt.dials = append(pt.dials, ap)
		pt.mu.Unlock()
	}
	dir, err := os.MkdirTemp("", "srp") // short: sun_path is 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pt.sock = filepath.Join(dir, "egress.sock")
	ln, err := net.Listen("unix", pt.sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Serve returned %v after cancel, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return within 10s of cancel")
		}
	})
	return pt
}

func (pt *proxyUnderTest) dialed() []netip.AddrPort {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return append([]netip.AddrPort(nil), pt.dials...)
}

func (pt *proxyUnderTest) conn(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("unix", pt.sock, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// connect sends CONNECT target and returns the reply; on 200 the returned
// reader and conn are the tunnel.
func (pt *proxyUnderTest) connect(t *testing.T, target string) (*http.Response, string, *bufio.Reader, net.Conn) {
	t.Helper()
	c := pt.conn(t)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, "", br, c
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body), br, c
}

// get sends an absolute-form GET for rawURL, exactly as written.
func (pt *proxyUnderTest) get(t *testing.T, rawURL string) (*http.Response, string) {
	t.Helper()
	c := pt.conn(t)
	host := strings.SplitN(strings.SplitN(rawURL, "://", 2)[1], "/", 2)[0]
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", rawURL, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodGet})
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// getThroughTunnel sends GET path over an established tunnel.
func getThroughTunnel(t *testing.T, br *bufio.Reader, c net.Conn, path string) (*http.Response, string) {
	t.Helper()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: target\r\nConnection: close\r\n\r\n", path)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		t.Fatalf("GET %s through tunnel: %v", path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// canary is a TCP listener on every local address (so 127.0.0.1, ::1 and
// 0.0.0.0 all reach it) that counts the connections it accepts and greets
// each with one byte, so a direct dial can wait until it was counted.
type canary struct {
	port  int
	count atomic.Int64
}

func newCanary(t *testing.T) *canary { t.Helper(); return newCanaryOn(t, netip.Addr{}) }

// newCanaryOn is newCanary listening on ip only (every address when ip is
// the zero Addr).
func newCanaryOn(t *testing.T, ip netip.Addr) *canary {
	t.Helper()
	addr := ":0"
	if ip.IsValid() {
		addr = netip.AddrPortFrom(ip, 0).String()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cn := &canary{port: ln.Addr().(*net.TCPAddr).Port}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cn.count.Add(1)
			_, _ = c.Write([]byte{'!'})
			c.Close()
		}
	}()
	return cn
}

// reach dials the canary directly at host and waits until it was counted:
// the positive control that the target is reachable without the proxy.
// Since one goroutine accepts in order, every earlier connection has been
// counted by the time reach returns.
func (cn *canary) reach(t *testing.T, host string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(cn.port)), 5*time.Second)
	if err != nil {
		t.Fatalf("positive control: direct dial to canary at %s: %v", host, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("positive control: canary at %s did not answer: %v", host, err)
	}
}

// TestLoopbackCanary: every spelling of a loopback (or unspecified) address,
// and every name resolving to one, is refused with 403 by CONNECT and by
// plain GET, and the proxy never connects: the canary, which a direct dial
// reaches, counts no connection, and the dialer saw no address at all.
func TestLoopbackCanary(t *testing.T) {
	cn := newCanary(t)
	// Positive controls: the canary answers direct dials at these spellings.
	for _, h := range []string{"127.0.0.1", "::1", "0.0.0.0", "localhost"} {
		cn.reach(t, h)
	}
	base := cn.count.Load()
	if base != 4 {
		t.Fatalf("canary counted %d direct connections, want 4", base)
	}

	res := newResolver(map[string][]string{
		"evil.test":   {"127.0.0.1"},
		"evil6.test":  {"::1"},
		"mapped.test": {"::ffff:127.0.0.1"},
		"rebind.test": {"93.184.216.34", "127.0.0.1"},
		"localhost":   {"127.0.0.1", "::1"},
	})
	// localhost itself cannot be allowed (ParseAllow refuses it, see
	// TestParseAllowRefusesLocalhost); unlisted, it is refused all the same.
	allow := []string{"evil.test:*", "evil6.test:*", "mapped.test:*", "rebind.test:*"}
	pt := startProxy(t, Config{Allow: allow, Resolver: res})

	P := strconv.Itoa(cn.port)
	tests := []struct {
		host   string // host as the client writes it (brackets included)
		reason string
		pt     *proxyUnderTest
	}{
		{"127.0.0.1", reasonLoopback, pt},
		{"127.0.0.1.", reasonLoopback, pt},
		{"127.1", reasonLoopback, pt},
		{"127.0.1", reasonLoopback, pt},
		{"2130706433", reasonLoopback, pt},
		{"017700000001", reasonLoopback, pt},
		{"0177.0.0.1", reasonLoopback, pt},
		{"0x7f.1", reasonLoopback, pt},
		{"0x7f.0.0.1", reasonLoopback, pt},
		{"0x7f000001", reasonLoopback, pt},
		{"127.127.127.127", reasonLoopback, pt},
		{"[::1]", reasonLoopback, pt},
		{"[0:0:0:0:0:0:0:1]", reasonLoopback, pt},
		{"[::ffff:127.0.0.1]", reasonLoopback, pt},
		{"[::ffff:7f00:1]", reasonLoopback, pt},
		{"[::7f00:1]", reasonLoopback, pt},
		{"[64:ff9b::7f00:1]", reasonLoopback, pt},
		{"[2002:7f00:1::]", reasonLoopback, pt},
		{"0.0.0.0", reasonUnspecified, pt},
		{"0", reasonUnspecified, pt},
		{"[::]", reasonUnspecified, pt},
		{"localhost", reasonNotAllowed, pt},
		{"localhost.", reasonNotAllowed, pt},
		{"LOCALHOST", reasonNotAllowed, pt},
		{"evil.test", reasonLoopback, pt},
		{"evil.test.", reasonLoopback, pt},
		{"evil6.test", reasonLoopback, pt},
		{"mapped.test", reasonLoopback, pt},
		{"rebind.test", reasonLoopback, pt},
		{"notlisted.test", reasonNotAllowed, pt},
		{"08.0.0.1", reasonBadHost, pt},
		{"127.0.0.1..", reasonBadHost, pt},
		{"1.2.3.4.5", reasonBadHost, pt},
	}
	for _, tt := range tests {
		for _, method := range []string{"CONNECT", "GET"} {
			t.Run(method+"/"+tt.host, func(t *testing.T) {
				var resp *http.Response
				var body string
				if method == "CONNECT" {
					resp, body, _, _ = tt.pt.connect(t, tt.host+":"+P)
				} else {
					resp, body = tt.pt.get(t, "http://"+tt.host+":"+P+"/")
				}
				if resp.StatusCode != http.StatusForbidden {
					t.Fatalf("status %d, want 403; body %q", resp.StatusCode, body)
				}
				if got := resp.Header.Get(RefusalHeader); got != tt.reason {
					t.Fatalf("%s = %q, want %q; body %q", RefusalHeader, got, tt.reason, body)
				}
				if !strings.Contains(body, "rule: ") || !strings.Contains(body, "to allow it: ") {
					t.Fatalf("body does not say which rule refused and how to allow: %q", body)
				}
			})
		}
	}
	// Requests that do not even parse as HTTP are refused by the server.
	for _, bad := range []string{"[fe80::1%lo]", "[::1"} {
		resp, body, _, _ := pt.connect(t, bad+":"+P)
		if resp.StatusCode == http.StatusOK {
			t.Errorf("CONNECT %s: 200 (%q)", bad, body)
		}
	}

	cn.reach(t, "127.0.0.1") // sync: every earlier connection is now counted
	if got := cn.count.Load() - base; got != 1 {
		t.Errorf("canary accepted %d connections during the proxy tests, want 0 (+1 for the final control)", got-1)
	}
	if d := pt.dialed(); len(d) != 0 {
		t.Errorf("the proxy dialer was asked to connect to %v; a refusal must never dial", d)
	}
}

func TestAudit(t *testing.T) {
	var audit sandboxtest.SyncBuffer
	res := newResolver(map[string][]string{"evil.test": {"127.0.0.1"}, "internal.test": {"10.0.0.7"}})
	pt := startProxy(t, Config{
		Allow:    []string{"evil.test", "internal.test"},
		Resolver: res,
		Audit:    &audit,
		Logger:   slog.New(slog.DiscardHandler),
	})
	pt.connect(t, "evil.test:443")
	pt.get(t, "http://internal.test/")
	pt.connect(t, "other.test:443")

	type line struct {
		Time, Event, Method, Host, IP, Decision, Reason string
		Port                                            int
	}
	want := []line{
		{Event: "egress", Method: "CONNECT", Host: "evil.test", Port: 443, IP: "127.0.0.1", Decision: "refuse", Reason: reasonLoopback},
		{Event: "egress", Method: "GET", Host: "internal.test", Port: 80, IP: "10.0.0.7", Decision: "refuse", Reason: reasonPrivate},
		{Event: "egress", Method: "CONNECT", Host: "other.test", Port: 443, IP: "", Decision: "refuse", Reason: reasonNotAllowed},
	}
	lines := strings.Split(strings.TrimSuffix(audit.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("audit has %d lines, want %d:\n%s", len(lines), len(want), audit.String())
	}
	for i, raw := range lines {
		var got line
		dec := json.NewDecoder(strings.NewReader(raw))
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("line %d %q: %v", i, raw, err)
		}
		if _, err := time.Parse(time.RFC3339Nano, got.Time); err != nil {
			t.Errorf("line %d: time %q: %v", i, got.Time, err)
		}
		got.Time = ""
		if got != want[i] {
			t.Errorf("line %d = %+v, want %+v", i, got, want[i])
		}
		for _, key := range []string{`"time"`, `"event"`, `"host"`, `"port"`, `"ip"`, `"decision"`, `"reason"`} {
			if !strings.Contains(raw, key+":") {
				t.Errorf("line %d lacks %s: %s", i, key, raw)
			}
		}
	}
}

// localTarget returns a reachable, non-loopback HTTP server answering
// /ok with "ok from test host": one on a local interface address when this
// host has one, else the network-namespace test host (idx as for
// newTestHost).
func localTarget(t *testing.T, idx int) (netip.Addr, int) {
	t.Helper()
	if ln := localListener(t); ln != nil {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok from test host")
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		ap := ln.Addr().(*net.TCPAddr).AddrPort()
		return ap.Addr().Unmap(), int(ap.Port())
	}
	h := sandboxtest.NewTestHost(t, idx) // skips, or fails under SANDBOX_REQUIRE=1, without root
	return h.Addr, h.Port
}

// localListener listens on an IPv4 address of a local interface that the
// proxy may be allowed to reach (not loopback, not link-local); nil when
// this host has none.
func localListener(t *testing.T) net.Listener {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := pfx.Addr()
		if v := allowlist.Classify(ip); !ip.Is4() || v.Never() {
			continue
		}
		ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
		if err != nil {
			continue
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	return nil
}

// TestEnvProxyIgnored: the host's HTTP(S)_PROXY points at a trap. goproxy's
// defaults would chain through it (shown by the control); this proxy must
// reach the target directly and never contact the trap.
func TestEnvProxyIgnored(t *testing.T) {
	trap := newCanary(t)
	trap.reach(t, "127.0.0.1") // positive control: the trap is reachable
	trapURL := "http://127.0.0.1:" + strconv.Itoa(trap.port)
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(k, trapURL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	ip, port := localTarget(t, 1)
	target := netip.AddrPortFrom(ip, uint16(port)).String()

	t.Run("control: a proxy on the standard library's defaults chains to the env proxy", func(t *testing.T) {
		// What http.ProxyFromEnvironment does, without its once-per-process
		// cache (an earlier test may have filled it with another
		// environment).
		before := trap.count.Load()
		naive := &httputil.ReverseProxy{
			Rewrite: func(*httputil.ProxyRequest) {},
			Transport: &http.Transport{Proxy: func(r *http.Request) (*url.URL, error) {
				return httpproxy.FromEnvironment().ProxyFunc()(r.URL)
			}},
			ErrorLog: log.New(io.Discard, "", 0),
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: naive}
		go srv.Serve(ln)
		defer srv.Close()
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "GET http://%s/ok HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, target)
		_, _ = http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodGet})
		trap.reach(t, "127.0.0.1")
		if got := trap.count.Load() - before; got < 2 {
			t.Fatalf("trap saw %d connections; a transport that reads HTTP_PROXY should have used it, so this test proves nothing", got-1)
		}
	})

	before := trap.count.Load()
	pt := startProxy(t, Config{Allow: []string{ip.String() + ":*"}})

	resp, body, br, c := pt.connect(t, target)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s: %d %q", target, resp.StatusCode, body)
	}
	if resp, body := getThroughTunnel(t, br, c, "/ok"); resp.StatusCode != 200 || body != "ok from test host" {
		t.Fatalf("through tunnel: %d %q", resp.StatusCode, body)
	}
	if resp, body := pt.get(t, "http://"+target+"/ok"); resp.StatusCode != 200 || body != "ok from test host" {
		t.Fatalf("GET: %d %q", resp.StatusCode, body)
	}
	trap.reach(t, "127.0.0.1")
	if got := trap.count.Load() - before; got != 1 {
		t.Fatalf("trap saw %d connections from the proxy, want 0", got-1)
	}
	if d := pt.dialed(); len(d) != 2 || d[0].Addr() != ip || d[1].Addr() != ip {
		t.Fatalf("dialer connected to %v, want %s twice", d, ip)
	}
}

// TestServeShutdown: cancelling ctx ends open tunnels and Serve returns.
func TestServeShutdown(t *testing.T) {
	ip, port := localTarget(t, 2)
	target := netip.AddrPortFrom(ip, uint16(port)).String()
	p, err := New(Config{Allow: []string{ip.String() + ":*"}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Serve(ctx, ln) }()

	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10s of cancel")
	}
	if _, err := io.ReadAll(br); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("tunnel still open after Serve returned")
		}
	}
	if c2, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c2.Close()
		t.Fatal("listener still accepting after Serve returned")
	}
}
