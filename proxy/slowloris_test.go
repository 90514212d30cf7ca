package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// slowIdx is the test-host index of this file's tests (netns_test.go and
// proxy_test.go use 0 to 2). Tests using it do not run in parallel.
const slowIdx = 3

// slowConn is one attacking connection and what a read on it saw.
type slowConn struct {
	kind   string
	c      net.Conn
	r      io.Reader // reads c, after anything the test already read
	start  time.Time // no later than the proxy could have started its timer
	closed time.Time // when the read ended
	err    error     // how it ended: a timeout means the proxy kept it open
}

// TestSlowloris: connections that send nothing, half a request line, a
// header one byte at a time, or nothing after a first request, are closed
// by the proxy when Config.ReadHeaderTimeout or Config.IdleTimeout passes,
// not before; while they are open other clients are answered at once; and
// once they are closed the proxy's goroutines are back to where they were.
// The control runs the same attack against timeouts longer than the test:
// the connections must still be open when the first case sees them closed,
// which shows that the test tells the two apart.
func TestSlowloris(t *testing.T) {
	const (
		window = 5 * time.Second // the timeouts of the case that closes them
		slack  = 3 * time.Second // after window, to see the closes

		silent  = 200 // connect, send nothing
		partial = 50  // send half a request line, then nothing
		trickle = 20  // send a header that never ends, a byte every 100 ms
		idle    = 30  // one complete request, then nothing (keep-alive)
		total   = silent + partial + trickle + idle
	)
	var host *sandboxtest.TestHost
	allow := []string{}
	if os.Geteuid() == 0 {
		h := sandboxtest.NewTestHost(t, slowIdx)
		host, allow = &h, []string{h.HostPort()}
	} else {
		t.Log("not root: no allowed request to the network-namespace test host, only refusals")
	}

	tests := []struct {
		name       string
		timeout    time.Duration // ReadHeaderTimeout and IdleTimeout
		wantClosed bool
	}{
		{"timeouts close them", window, true},
		{"control: timeouts longer than the test keep them open", time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt := startProxy(t, Config{Allow: allow, ReadHeaderTimeout: tt.timeout, IdleTimeout: tt.timeout})
			normalRequests(t, pt, host) // warm-up: the upstream pool holds a connection from now on
			baseG := settledGoroutines()

			attack := time.Now()
			observe := attack.Add(window + slack)
			var conns []*slowConn
			open := func(kind string) *slowConn {
				start := time.Now()
				c, err := net.DialTimeout("unix", pt.sock, 5*time.Second)
				if err != nil {
					t.Fatalf("open %s connection %d: %v", kind, len(conns), err)
				}
				t.Cleanup(func() { c.Close() })
				sc := &slowConn{kind: kind, c: c, r: c, start: start}
				conns = append(conns, sc)
				return sc
			}
			for range silent {
				open("silent")
			}
			for range partial {
				sc := open("partial")
				if _, err := io.WriteString(sc.c, "GET http://blocked.test/ HTT"); err != nil {
					t.Fatal(err)
				}
			}
			stop := make(chan struct{})
			var writers sync.WaitGroup
			for range trickle {
				sc := open("trickle")
				writers.Go(func() { trickleHeader(sc.c, stop) })
			}
			for range idle {
				sc := open("idle")
				_ = sc.c.SetDeadline(time.Now().Add(5 * time.Second))
				fmt.Fprint(sc.c, "GET /ok HTTP/1.1\r\nHost: proxy\r\n\r\n") // origin-form: 400, kept alive
				br := bufio.NewReader(sc.c)
				resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
				if err != nil {
					t.Fatalf("idle connection's first request: %v", err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest || resp.Close {
					t.Fatalf("idle connection's first request: %d, close=%v; want 400 on a kept-alive connection", resp.StatusCode, resp.Close)
				}
				sc.r = br
			}

			// Each connection is watched by a read that ends when the proxy
			// closes it, or at observe.
			var watchers sync.WaitGroup
			var closedEarly atomic.Int64
			for _, sc := range conns {
				_ = sc.c.SetReadDeadline(observe)
				watchers.Go(func() {
					buf := make([]byte, 512)
					for {
						if _, err := sc.r.Read(buf); err != nil {
							sc.closed, sc.err = time.Now(), err
							if !errors.Is(err, os.ErrDeadlineExceeded) {
								closedEarly.Add(1)
							}
							return
						}
					}
				})
			}

			// The attack is in place: the proxy serves every connection
			// (one goroutine each, besides the test's watchers and writers).
			want := baseG + 2*total + trickle
			if !waitFor(5*time.Second, func() bool { return runtime.NumGoroutine() >= want }) {
				t.Fatalf("goroutines %d, want >= %d: the proxy did not accept all %d connections", runtime.NumGoroutine(), want, total)
			}

			// Other clients are answered at once, while all of them are open.
			lat := normalRequests(t, pt, host)
			if n := closedEarly.Load(); n != 0 || time.Since(attack) >= window {
				t.Fatalf("%d connections ended and %v passed before the other clients were answered; "+
					"this run shows nothing about serving them alongside (machine too slow?)", n, time.Since(attack))
			}
			if lat > window/2 {
				t.Errorf("a request of another client took %v during the attack, want < %v", lat, window/2)
			}
			t.Logf("%d slow connections open; another client's slowest request took %v", total, lat)

			watchers.Wait()
			close(stop)
			writers.Wait()

			type tally struct{ closed, open, early int }
			byKind := map[string]*tally{}
			var lastClose time.Duration
			for _, sc := range conns {
				k := byKind[sc.kind]
				if k == nil {
					k = &tally{}
					byKind[sc.kind] = k
				}
				if errors.Is(sc.err, os.ErrDeadlineExceeded) {
					k.open++
					continue
				}
				k.closed++
				// The timer starts no earlier than sc.start; allow for the
				// granularity of deadlines.
				if d := sc.closed.Sub(sc.start); d < tt.timeout-50*time.Millisecond {
					k.early++
					t.Logf("%s connection closed after %v (%v), before the %v timeout", sc.kind, d, sc.err, tt.timeout)
				}
				lastClose = max(lastClose, sc.closed.Sub(attack))
			}
			for kind, k := range byKind {
				switch {
				case tt.wantClosed && (k.open != 0 || k.early != 0):
					t.Errorf("%s: %d of %d still open %v after the attack began, %d closed before the timeout; want all closed by the timeout",
						kind, k.open, k.open+k.closed, window+slack, k.early)
				case !tt.wantClosed && k.closed != 0:
					t.Errorf("control: %s: %d of %d closed, want all still open: the test cannot tell a timeout from another close",
						kind, k.closed, k.open+k.closed)
				}
			}
			if tt.wantClosed && !t.Failed() {
				t.Logf("all %d closed by the proxy, none before its timeout; the last %v after the attack began", total, lastClose)
			}

			// Goroutines: back to the baseline once the proxy closed them
			// (before the test closes its ends); held while they are open.
			got := 0
			if tt.wantClosed {
				if !waitFor(5*time.Second, func() bool { got = runtime.NumGoroutine(); return got <= baseG+5 }) {
					t.Errorf("goroutines %d after the proxy closed the slow connections, want <= %d (baseline %d + 5)", got, baseG+5, baseG)
				}
			} else {
				if got = runtime.NumGoroutine(); got < baseG+total {
					t.Errorf("control: goroutines %d, want >= %d while the proxy holds %d connections", got, baseG+total, total)
				}
				for _, sc := range conns {
					sc.c.Close()
				}
				if !waitFor(5*time.Second, func() bool { return runtime.NumGoroutine() <= baseG+5 }) {
					t.Errorf("control: goroutines %d after the test closed its ends, want <= %d", runtime.NumGoroutine(), baseG+5)
				}
			}
			t.Logf("goroutines: baseline %d, now %d", baseG, runtime.NumGoroutine())
		})
	}
}

// trickleHeader writes a request header that never ends, one byte every
// 100 ms, until stop is closed or a write fails.
func trickleHeader(c net.Conn, stop <-chan struct{}) {
	header := "GET http://blocked.test/ HTTP/1.1\r\n" + strings.Repeat("X-Slow: 1\r\n", 1000)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < len(header); i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte{header[i]}); err != nil {
			return
		}
	}
}

// normalRequests is another client's traffic: refused GETs and CONNECTs,
// which the proxy answers itself, and with host, an allowed GET and an
// allowed CONNECT tunnel to it. It fails t on a wrong answer and returns
// the slowest request's duration.
func normalRequests(t *testing.T, pt *proxyUnderTest, host *sandboxtest.TestHost) time.Duration {
	t.Helper()
	var slowest time.Duration
	timed := func(f func()) {
		start := time.Now()
		f()
		slowest = max(slowest, time.Since(start))
	}
	for range 5 {
		timed(func() {
			resp, body := pt.get(t, "http://blocked.test/")
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get(RefusalHeader) != reasonNotAllowed {
				t.Fatalf("refused GET: %d %q", resp.StatusCode, body)
			}
		})
		timed(func() {
			resp, body, _, c := pt.connect(t, "127.0.0.1:1")
			c.Close()
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get(RefusalHeader) != reasonLoopback {
				t.Fatalf("refused CONNECT: %d %q", resp.StatusCode, body)
			}
		})
	}
	if host == nil {
		return slowest
	}
	timed(func() {
		if resp, body := pt.get(t, "http://"+host.HostPort()+"/ok"); resp.StatusCode != 200 || body != "ok from test host" {
			t.Fatalf("allowed GET: %d %q", resp.StatusCode, body)
		}
	})
	timed(func() {
		resp, body, br, c := pt.connect(t, host.HostPort())
		defer c.Close() // ends the tunnel, and its goroutines
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("allowed CONNECT: %d %q", resp.StatusCode, body)
		}
		if resp, body := getThroughTunnel(t, br, c, "/ok"); resp.StatusCode != 200 || body != "ok from test host" {
			t.Fatalf("GET through the tunnel: %d %q", resp.StatusCode, body)
		}
	})
	return slowest
}

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// settledGoroutines returns the goroutine count once it has not changed for
// 100 ms (or after 3 s): goroutines of connections just closed unwind first.
func settledGoroutines() int {
	n, same := runtime.NumGoroutine(), 0
	for end := time.Now().Add(3 * time.Second); same < 5 && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
		if m := runtime.NumGoroutine(); m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}

// TestOversizedHeader: a header beyond the limit is answered with 431 and
// the connection closed, rather than buffered.
func TestOversizedHeader(t *testing.T) {
	pt := startProxy(t, Config{})
	c := pt.conn(t)
	go func() { // the proxy may answer before the whole header is written
		fmt.Fprintf(c, "GET http://blocked.test/ HTTP/1.1\r\nHost: blocked.test\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 200<<10))
	}()
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		t.Fatalf("oversized header: %v", err)
	}
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("oversized header: %d, want 431", resp.StatusCode)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("connection still open after 431")
	}
}

// TestTimeoutConfig: zero timeouts mean the defaults; negative ones are
// refused.
func TestTimeoutConfig(t *testing.T) {
	tests := []struct {
		name                 string
		cfg                  Config
		wantHeader, wantIdle time.Duration
		wantErr              bool
	}{
		{"defaults", Config{}, DefaultReadHeaderTimeout, DefaultIdleTimeout, false},
		{"set", Config{ReadHeaderTimeout: time.Second, IdleTimeout: 2 * time.Second}, time.Second, 2 * time.Second, false},
		{"negative header timeout", Config{ReadHeaderTimeout: -1}, 0, 0, true},
		{"negative idle timeout", Config{IdleTimeout: -time.Second}, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("New: err = %v, want error: %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if p.readHeaderTimeout != tt.wantHeader || p.idleTimeout != tt.wantIdle {
				t.Errorf("timeouts %v, %v; want %v, %v", p.readHeaderTimeout, p.idleTimeout, tt.wantHeader, tt.wantIdle)
			}
		})
	}
}
