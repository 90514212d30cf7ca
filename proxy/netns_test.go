package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// helperEnv selects a helper mode of the test binary (see TestMain).
const helperEnv = "SANDBOX_RUN_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "proxy-testhost":
		os.Exit(runTestHost(os.Getenv("SANDBOX_RUN_TEST_LISTEN")))
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", helperEnv, os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// runTestHost is the HTTP server of the test host inside its network
// namespace: /ok, /redirect?to=URL (302), /count (connections accepted so
// far). It prints "ready" once listening and exits when stdin closes.
func runTestHost(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var conns atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok from test host") })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, conns.Load()) })
	srv := &http.Server{Handler: mux, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}}
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	fmt.Println("ready")
	_ = srv.Serve(ln)
	return 1
}

// testHost is an HTTP server in a network namespace of its own, reachable
// from the test over a veth pair at addr:port.
type testHost struct {
	addr netip.Addr
	port int
}

func (h testHost) hostport() string { return netip.AddrPortFrom(h.addr, uint16(h.port)).String() }

// count reads the test host's connection count directly (not through the
// proxy); the request itself is counted.
func (h testHost) count(t *testing.T) int {
	t.Helper()
	c := http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + h.hostport() + "/count")
	if err != nil {
		t.Fatalf("direct GET /count: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatalf("/count: %q", b)
	}
	return n
}

// newTestHost creates a network namespace and a veth pair with addresses
// from 198.18.0.0/15 (names and subnet derived from the pid and idx, so
// parallel runs do not clash), and starts the test host in it. Everything is
// removed in t.Cleanup.
func newTestHost(t *testing.T, idx int) testHost {
	t.Helper()
	if os.Geteuid() != 0 {
		sandboxtest.Unavailable(t, "network namespaces", "run as root with iproute2")
	}
	ipCmd, err := exec.LookPath("ip")
	if err != nil {
		sandboxtest.Unavailable(t, "network namespaces", "run as root with iproute2 (ip not found)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	ns := fmt.Sprintf("srp-test-%d-%d", pid, idx)
	vethOut := fmt.Sprintf("srp%da%d", pid%100000, idx) // <= 15 bytes
	vethIn := fmt.Sprintf("srp%db%d", pid%100000, idx)
	block := uint32((pid*4 + idx) % (1 << 15)) // a /30 inside 198.18.0.0/15
	base := uint32(198)<<24 | uint32(18)<<16 | block<<2
	v4 := func(n uint32) netip.Addr {
		return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	}
	outside, inside := v4(base+1), v4(base+2)

	run := func(args ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, ipCmd, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	cleanup := func() {
		_ = run("link", "del", vethOut)
		_ = run("netns", "del", ns)
	}
	cleanup() // a leftover from a crashed run with the same pid
	if err := run("netns", "add", ns); err != nil {
		sandboxtest.Unavailable(t, "network namespaces", "run as root with iproute2 and CAP_SYS_ADMIN: "+err.Error())
	}
	t.Cleanup(cleanup)
	for _, args := range [][]string{
		{"link", "add", vethOut, "type", "veth", "peer", "name", vethIn},
		{"link", "set", vethIn, "netns", ns},
		{"addr", "add", outside.String() + "/30", "dev", vethOut},
		{"link", "set", vethOut, "up"},
		{"netns", "exec", ns, "ip", "addr", "add", inside.String() + "/30", "dev", vethIn},
		{"netns", "exec", ns, "ip", "link", "set", vethIn, "up"},
		{"netns", "exec", ns, "ip", "link", "set", "lo", "up"},
	} {
		if err := run(args...); err != nil {
			t.Fatal(err)
		}
	}

	h := testHost{addr: inside, port: 8080}
	ctx, cancel := context.WithCancel(context.Background())
	if dl, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), dl)
	}
	cmd := exec.CommandContext(ctx, ipCmd, "netns", "exec", ns, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=proxy-testhost", "SANDBOX_RUN_TEST_LISTEN="+h.hostport())
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // runs before the namespace is deleted (LIFO)
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		cancel()
	})
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if line != "ready\n" {
			t.Fatalf("test host did not start: %q", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("test host not ready after 20s")
	}
	return h
}

// TestRealHost runs the proxy against a real host on another network stack.
func TestRealHost(t *testing.T) {
	h := newTestHost(t, 0)
	cn := newCanary(t)

	// Positive control: the host answers directly, without the proxy.
	direct := http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}
	resp, err := direct.Get("http://" + h.hostport() + "/ok")
	if err != nil {
		t.Fatalf("positive control: direct GET: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok from test host" {
		t.Fatalf("positive control: direct GET = %d %q", resp.StatusCode, b)
	}

	t.Run("allowed when an entry names the IP", func(t *testing.T) {
		pt := startProxy(t, Config{Allow: []string{h.hostport()}})
		if resp, body := pt.get(t, "http://"+h.hostport()+"/ok"); resp.StatusCode != 200 || body != "ok from test host" {
			t.Fatalf("GET through proxy: %d %q", resp.StatusCode, body)
		}
		resp, body, br, c := pt.connect(t, h.hostport())
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %d %q", resp.StatusCode, body)
		}
		if resp, body := getThroughTunnel(t, br, c, "/ok"); resp.StatusCode != 200 || body != "ok from test host" {
			t.Fatalf("GET through tunnel: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("allowed by a CIDR entry", func(t *testing.T) {
		pt := startProxy(t, Config{Allow: []string{"198.18.0.0/15"}})
		if resp, body := pt.get(t, "http://"+h.hostport()+"/ok"); resp.StatusCode != 200 {
			t.Fatalf("GET through proxy: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("refused when no entry names the IP", func(t *testing.T) {
		res := newResolver(map[string][]string{"testhost.test": {h.addr.String()}})
		pt := startProxy(t, Config{Allow: []string{"testhost.test:*", "198.51.100.1"}, Resolver: res})
		before := h.count(t)
		cases := []struct {
			name, reason, mention string
			do                    func() (*http.Response, string)
		}{
			{"GET by name", reasonPrivate, "add --allow-host " + h.hostport(), func() (*http.Response, string) {
				return pt.get(t, "http://testhost.test:8080/ok")
			}},
			{"CONNECT by name", reasonPrivate, "a host name entry is not enough", func() (*http.Response, string) {
				r, b, _, _ := pt.connect(t, "testhost.test:8080")
				return r, b
			}},
			{"GET by IP", reasonPrivate, "198.18.0.0/15", func() (*http.Response, string) {
				return pt.get(t, "http://"+h.hostport()+"/ok")
			}},
			{"CONNECT by IP", reasonPrivate, "add --allow-host " + h.hostport(), func() (*http.Response, string) {
				r, b, _, _ := pt.connect(t, h.hostport())
				return r, b
			}},
		}
		for _, tc := range cases {
			resp, body := tc.do()
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get(RefusalHeader) != tc.reason {
				t.Errorf("%s: %d %s=%q, want 403 %q; body %q", tc.name, resp.StatusCode, RefusalHeader,
					resp.Header.Get(RefusalHeader), tc.reason, body)
			}
			if !strings.Contains(body, tc.mention) {
				t.Errorf("%s: body %q does not mention %q", tc.name, body, tc.mention)
			}
		}
		if after := h.count(t); after != before+1 { // +1: the /count request itself
			t.Errorf("test host accepted %d connections during the refusals, want 0", after-before-1)
		}
		if d := pt.dialed(); len(d) != 0 {
			t.Errorf("dialer was asked for %v during refusals", d)
		}
	})

	t.Run("redirect to loopback is returned, not followed", func(t *testing.T) {
		cn.reach(t, "127.0.0.1") // positive control
		base := cn.count.Load()
		pt := startProxy(t, Config{Allow: []string{h.hostport()}})
		loc := "http://127.0.0.1:" + strconv.Itoa(cn.port) + "/"
		resp, body := pt.get(t, "http://"+h.hostport()+"/redirect?to="+loc)
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != loc {
			t.Fatalf("GET /redirect = %d Location %q, want 302 %q; body %q", resp.StatusCode, resp.Header.Get("Location"), loc, body)
		}
		// The client following the redirect through the proxy is refused.
		resp, body = pt.get(t, resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(RefusalHeader) != reasonLoopback {
			t.Fatalf("following the redirect: %d %q", resp.StatusCode, body)
		}
		cn.reach(t, "127.0.0.1")
		if got := cn.count.Load() - base; got != 1 {
			t.Fatalf("canary accepted %d connections, want 0", got-1)
		}
		for _, ap := range pt.dialed() {
			if ap.Addr() != h.addr {
				t.Fatalf("dialer was asked for %s", ap)
			}
		}
	})
}
