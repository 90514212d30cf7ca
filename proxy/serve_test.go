package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// rawUpstream serves each connection on a local non-loopback address with
// serve, and returns that address.
func rawUpstream(t *testing.T, serve func(c *net.TCPConn)) netip.AddrPort {
	t.Helper()
	ln := localListener(t)
	if ln == nil {
		sandboxtest.Unavailable(t, "a non-loopback local IPv4 address", "give the host an interface address besides loopback")
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				serve(c.(*net.TCPConn))
			}()
		}
	}()
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// TestTunnelEarlyBytes: a client that sends its first bytes in the same
// write as the CONNECT header (as TLS clients often do) has them reach the
// upstream first, then the rest, in order.
func TestTunnelEarlyBytes(t *testing.T) {
	up := rawUpstream(t, func(c *net.TCPConn) {
		br := bufio.NewReader(c)
		for i := 0; i < 2; i++ {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			fmt.Fprintf(c, "got %s", line)
		}
	})
	pt := startProxy(t, Config{Allow: []string{up.Addr().String() + ":*"}})
	c := pt.conn(t)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\nearly\n", up, up)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	io.WriteString(c, "late\n")
	for _, want := range []string{"got early\n", "got late\n"} {
		if got, err := br.ReadString('\n'); got != want {
			t.Fatalf("through the tunnel: %q, %v; want %q", got, err, want)
		}
	}
}

// TestTunnelHalfClose: a client that shuts down its sending half still
// gets the whole answer: the upstream sees end of file, answers, and the
// answer reaches the client before the tunnel closes.
func TestTunnelHalfClose(t *testing.T) {
	up := rawUpstream(t, func(c *net.TCPConn) {
		b, err := io.ReadAll(c) // to the client's end of file
		if err != nil {
			return
		}
		fmt.Fprintf(c, "read %d bytes: %s", len(b), b)
		c.CloseWrite()
	})
	pt := startProxy(t, Config{Allow: []string{up.Addr().String() + ":*"}})
	_, body, br, c := pt.connect(t, up.String())
	if body != "" {
		t.Fatalf("CONNECT refused: %s", body)
	}
	io.WriteString(c, "question")
	if err := c.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(br)
	if err != nil || string(got) != "read 8 bytes: question" {
		t.Fatalf("answer after half-close: %q, %v", got, err)
	}
}

// TestForwardStripsProxyHeaders: a forwarded request reaches the upstream
// without the headers meant for the proxy (Proxy-Authorization,
// Proxy-Connection) or any hop-by-hop header the client named, and without
// X-Forwarded-For naming the client. The client's other headers and body
// arrive unchanged, and the upstream's redirect comes back as it is.
func TestForwardStripsProxyHeaders(t *testing.T) {
	seen := make(chan http.Header, 1)
	ln := localListener(t)
	if ln == nil {
		sandboxtest.Unavailable(t, "a non-loopback local IPv4 address", "give the host an interface address besides loopback")
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h := r.Header.Clone()
		h.Set("X-Test-Body", string(b))
		h.Set("X-Test-Host", r.Host)
		seen <- h
		http.Redirect(w, r, "http://elsewhere.test/", http.StatusFound)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	target := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()

	pt := startProxy(t, Config{Allow: []string{ap.Addr().Unmap().String() + ":*"}})
	c := pt.conn(t)
	fmt.Fprintf(c, "POST http://%s/x HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic c2VjcmV0\r\n"+
		"Proxy-Connection: keep-alive\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nX-Keep: 2\r\nContent-Length: 4\r\n\r\nbody", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodPost})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "http://elsewhere.test/" {
		t.Errorf("answer %d, Location %q: want the upstream's 302 as it is", resp.StatusCode, resp.Header.Get("Location"))
	}
	var h http.Header
	select {
	case h = <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream saw no request")
	}
	for _, k := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Hop", "X-Forwarded-For"} {
		if v := h.Values(k); len(v) > 0 {
			t.Errorf("upstream received %s: %q", k, v)
		}
	}
	if h.Get("X-Keep") != "2" || h.Get("X-Test-Body") != "body" || h.Get("X-Test-Host") != target {
		t.Errorf("upstream received X-Keep %q, body %q, Host %q; want 2, body, %s",
			h.Get("X-Keep"), h.Get("X-Test-Body"), h.Get("X-Test-Host"), target)
	}
}

// TestOriginFormRefused: a request meant for an origin server (a path, not
// an absolute URL) gets a 400 that says what the proxy expects, and opens
// no connection.
func TestOriginFormRefused(t *testing.T) {
	pt := startProxy(t, Config{Allow: []string{"example.com"}})
	c := pt.conn(t)
	io.WriteString(c, "GET /ok HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodGet})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "absolute URL or CONNECT") {
		t.Errorf("origin-form request: %d %q", resp.StatusCode, b)
	}
	if d := pt.dialed(); len(d) != 0 {
		t.Errorf("the proxy dialled %v", d)
	}
}

// TestForwardStreams: a forwarded answer reaches the client while the
// upstream is still sending it, whether its length is unknown (chunked: a
// stream, a long poll) or known (held at most forwardFlushInterval): the
// client reads the first part while the upstream waits, before it sends
// the rest, for the client to have read it.
func TestForwardStreams(t *testing.T) {
	for _, c := range []struct{ name, head, first, rest, want string }{
		{"chunked", "Transfer-Encoding: chunked", "5\r\nfirst\r\n", "4\r\nlast\r\n0\r\n\r\n", "firstlast"},
		{"known length", "Content-Length: 9", "first", "last", "firstlast"},
	} {
		t.Run(c.name, func(t *testing.T) {
			release := make(chan struct{})
			up := rawUpstream(t, func(conn *net.TCPConn) {
				if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
					return
				}
				fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\n%s\r\n\r\n%s", c.head, c.first)
				select {
				case <-release:
				case <-time.After(15 * time.Second):
					return
				}
				io.WriteString(conn, c.rest)
			})
			pt := startProxy(t, Config{Allow: []string{up.Addr().String() + ":*"}})
			conn := pt.conn(t)
			fmt.Fprintf(conn, "GET http://%s/stream HTTP/1.1\r\nHost: %s\r\n\r\n", up, up)
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodGet})
			if err != nil {
				t.Fatalf("no answer header while the upstream waits: %v", err)
			}
			first := make([]byte, 5)
			if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first" {
				t.Fatalf("first part while the upstream waits: %q, %v", first, err)
			}
			close(release)
			rest, err := io.ReadAll(resp.Body)
			if got := string(first) + string(rest); err != nil || got != c.want {
				t.Errorf("whole answer %q, %v; want %q", got, err, c.want)
			}
		})
	}
}
