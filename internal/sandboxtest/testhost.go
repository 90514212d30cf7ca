package sandboxtest

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
)

// ServeTestHost must be called first thing in the TestMain of a package
// that uses NewTestHost: in the re-executed test binary inside the test
// host's network namespace it serves and exits; elsewhere it returns. It
// goes before RunHelper, which has no "testhost" mode and would refuse it.
func ServeTestHost() {
	if os.Getenv(HelperEnv) == "testhost" {
		os.Exit(runTestHost(os.Getenv("SANDBOX_RUN_TEST_LISTEN")))
	}
}

// runTestHost is the HTTP server of the test host inside its network
// namespace: /ok, /redirect?to=URL (302), /count (connections accepted so
// far), /bytes?n=N (N bytes, with a Content-Length, for throughput
// benchmarks), and the odd-port services (OddPort). It prints "ready" once listening and exits when stdin closes.
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
	mux.HandleFunc("/bytes", ServeBytes)
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if err := serveOddPort(host, mux); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
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

// maxBytes bounds /bytes?n=: 4 GiB is more than any benchmark asks for.
const maxBytes = 4 << 30

// chunk is what /bytes writes, over and over; its content does not matter.
var chunk = make([]byte, 1<<20)

// ServeBytes answers /bytes?n=N with N zero bytes (0 <= N <= 4 GiB) and a
// Content-Length, so that a client can measure a download of a known size.
// Scripts that run their own test host (scripts/bench) serve it too.
func ServeBytes(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	if err != nil || n < 0 || n > maxBytes {
		http.Error(w, "n: want an integer between 0 and 4 GiB", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	for n > 0 {
		k := min(n, int64(len(chunk)))
		if _, err := w.Write(chunk[:k]); err != nil {
			return
		}
		n -= k
	}
}

// TestHost is an HTTP server in a network namespace of its own, reachable
// from the test over a veth pair at addr:port.
type TestHost struct {
	Addr netip.Addr
	Port int
	// Local is the other end of the veth pair, in the test's own network
	// namespace: an address of this host's own interfaces, in the same
	// range as Addr.
	Local netip.Addr
	// Netns is the name of the host's network namespace (ip netns exec
	// NETNS ...), for tests that run another server there.
	Netns string
}

// HostPort is the test host's address as host:port.
func (h TestHost) HostPort() string { return netip.AddrPortFrom(h.Addr, uint16(h.Port)).String() }

// Count reads the test host's connection count directly (not through the
// proxy); the request itself is counted.
func (h TestHost) Count(t testing.TB) int {
	t.Helper()
	c := http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + h.HostPort() + "/count")
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

// NewTestHost creates a network namespace and a veth pair with addresses
// from 198.18.0.0/15 (names and subnet derived from the pid and idx, so
// parallel runs do not clash), and starts the test host in it. Everything is
// removed in t.Cleanup. Benchmarks may call it too (b.Cleanup); the
// host then lives until the benchmark ends.
//
// idx is 0 to 3: the /30 a host gets is pid*4+idx, so a larger idx would
// take the block of another process's host.
func NewTestHost(t testing.TB, idx int) TestHost {
	t.Helper()
	if idx < 0 || idx > 3 {
		t.Fatalf("sandboxtest: NewTestHost idx %d: want 0 to 3", idx)
	}
	// Only root wires up a network namespace; the unprivileged CI lane
	// skips every test that needs a test host by design, and the root lane
	// runs them.
	Root(t)
	ipCmd, err := exec.LookPath("ip")
	if err != nil {
		Unavailable(t, "network namespaces", "run as root with iproute2 (ip not found)")
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
	sweepTestHosts(run)
	if err := run("netns", "add", ns); err != nil {
		Unavailable(t, "network namespaces", "run as root with iproute2 and CAP_SYS_ADMIN: "+err.Error())
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

	h := TestHost{Addr: inside, Port: 8080, Local: outside, Netns: ns}
	ctx, cancel := context.WithCancel(context.Background())
	// *testing.T has a deadline; a benchmark (*testing.B) has none.
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			ctx, cancel = context.WithDeadline(context.Background(), dl)
		}
	}
	cmd := exec.CommandContext(ctx, ipCmd, "netns", "exec", ns, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), HelperEnv+"=testhost", "SANDBOX_RUN_TEST_LISTEN="+h.HostPort())
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
