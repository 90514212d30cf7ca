package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestForwardPlainHeaders: a GET that forwardPlain takes reaches the
// upstream without the proxy's and hop-by-hop headers (those the
// Connection header names too), without Forwarded/X-Forwarded-* and without
// a User-Agent the client did not send; the answer comes back without the
// upstream's hop-by-hop headers. Control: the client's and the upstream's
// other headers pass, and a POST (ReverseProxy's path, the behaviour
// forwardPlain copies) is stripped the same.
func TestForwardPlainHeaders(t *testing.T) {
	seen := make(chan http.Header, 2)
	up := rawUpstream(t, func(c *net.TCPConn) {
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			seen <- r.Header
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: X-Up-Hop\r\nX-Up-Hop: 1\r\n"+
				"Keep-Alive: timeout=5\r\nX-Up-Keep: 2\r\n\r\nok")
		}
	})
	pt := startProxy(t, Config{Allow: []string{up.Addr().String() + ":*"}})
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		c := pt.conn(t)
		fmt.Fprintf(c, "%s http://%s/x HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic c2VjcmV0\r\n"+
			"Proxy-Connection: keep-alive\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 1\r\nX-Forwarded-For: 10.1.2.3\r\n"+
			"Forwarded: for=10.1.2.3\r\nX-Keep: 2\r\nContent-Length: 0\r\n\r\n", method, up, up)
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(body) != "ok" || resp.Header.Get("X-Up-Keep") != "2" {
			t.Errorf("%s: answer %d %q, X-Up-Keep %q: want 200 ok 2", method, resp.StatusCode, body, resp.Header.Get("X-Up-Keep"))
		}
		for _, k := range []string{"X-Up-Hop", "Keep-Alive"} {
			if v := resp.Header.Values(k); len(v) > 0 {
				t.Errorf("%s: the client received %s: %q", method, k, v)
			}
		}
		var h http.Header
		select {
		case h = <-seen:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the upstream saw no request", method)
		}
		for _, k := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Hop", "Keep-Alive", "X-Forwarded-For", "Forwarded", "User-Agent"} {
			if v := h.Values(k); len(v) > 0 {
				t.Errorf("%s: upstream received %s: %q", method, k, v)
			}
		}
		if h.Get("X-Keep") != "2" {
			t.Errorf("%s: upstream received X-Keep %q, want 2", method, h.Get("X-Keep"))
		}
	}
}

// keepAliveUpstream answers every request on a connection with "ok" (kept
// alive) and counts the connections it accepted; with closeAfter it closes
// each connection after its first answer, as an upstream whose idle
// timeout passed.
func keepAliveUpstream(t *testing.T, closeAfter bool) (netip.AddrPort, *atomic.Int32) {
	var accepted atomic.Int32
	up := rawUpstream(t, func(c *net.TCPConn) {
		accepted.Add(1)
		br := bufio.NewReader(c)
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			if closeAfter {
				time.Sleep(50 * time.Millisecond) // the proxy has pooled it
				return
			}
		}
	})
	return up, &accepted
}

// getOn sends a GET for http://up/path on c (kept alive) and returns the
// status and body.
func getOn(t *testing.T, c net.Conn, br *bufio.Reader, up netip.AddrPort) (int, string) {
	t.Helper()
	fmt.Fprintf(c, "GET http://%s/x HTTP/1.1\r\nHost: %s\r\n\r\n", up, up)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestForwardPlainPool: sequential GETs reuse one upstream connection; when
// the upstream closed it while it was idle, the next GET is sent again on a
// new one and succeeds. Control: the closing upstream did close (one
// connection per request), so the second GET met a closed pooled
// connection, which the first case shows is what it is given.
func TestForwardPlainPool(t *testing.T) {
	for _, c := range []struct {
		name       string
		closeAfter bool
		want       int32
	}{{"kept", false, 1}, {"closed while idle", true, 3}} {
		t.Run(c.name, func(t *testing.T) {
			up, accepted := keepAliveUpstream(t, c.closeAfter)
			pt := startProxy(t, Config{Allow: []string{up.Addr().String() + ":*"}})
			conn := pt.conn(t)
			br := bufio.NewReader(conn)
			for i := range 3 {
				if i > 0 && c.closeAfter {
					time.Sleep(200 * time.Millisecond) // the upstream has closed
				}
				if code, body := getOn(t, conn, br, up); code != http.StatusOK || body != "ok" {
					t.Fatalf("GET %d: %d %q", i, code, body)
				}
			}
			if n := accepted.Load(); n != c.want {
				t.Errorf("upstream accepted %d connections for 3 GETs, want %d", n, c.want)
			}
		})
	}
}

// TestPlainPoolCheckedAddress: a pooled connection is given only to a
// request whose decision checked the address it is connected to, on the
// same target. Control: the same connection is given to a decision that
// checked its address.
func TestPlainPoolCheckedAddress(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	tgt, err := parseTarget("example.com:80", 0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := parseTarget("example.com:8080", 0)
	if err != nil {
		t.Fatal(err)
	}
	pp := &plainPool{idle: make(map[target][]*plainConn)}
	pc := &plainConn{ip: a}
	pp.put(tgt, pc)
	if got := pp.get(&decision{t: tgt, ips: []netip.Addr{b}}); got != nil {
		t.Error("a connection to 192.0.2.1 was given to a decision that checked only 192.0.2.2")
	}
	if got := pp.get(&decision{t: other, ips: []netip.Addr{a}}); got != nil {
		t.Error("a connection for port 80 was given to a decision for port 8080")
	}
	if got := pp.get(&decision{t: tgt, ips: []netip.Addr{b, a}}); got != pc {
		t.Error("control: the connection was not given to a decision that checked its address")
	}
}

// TestForwardPlainCutAnswer: an answer the upstream cuts short reaches the
// client cut short (the connection ends before the announced length), not
// as a whole shorter answer. Control: the whole answer reads to the end.
func TestForwardPlainCutAnswer(t *testing.T) {
	for _, c := range []struct {
		name, body string
		wantErr    bool
	}{{"whole", "0123456789", false}, {"cut", "01234", true}} {
		t.Run(c.name, func(t *testing.T) {
			up := rawUpstream(t, func(conn *net.TCPConn) {
				if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
					return
				}
				io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"+c.body)
			})
			pt := startProxy(t, Config{Allow: []string{up.Addr().String() + ":*"}})
			conn := pt.conn(t)
			code, err := func() (int, error) {
				fmt.Fprintf(conn, "GET http://%s/x HTTP/1.1\r\nHost: %s\r\n\r\n", up, up)
				resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodGet})
				if err != nil {
					return 0, err
				}
				_, err = io.ReadAll(resp.Body)
				return resp.StatusCode, err
			}()
			if gotErr := err != nil; gotErr != c.wantErr || code != http.StatusOK {
				t.Errorf("answer %d, read error %v; want 200 and an error: %v", code, err, c.wantErr)
			}
			if c.wantErr && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("read error %v, want unexpected EOF", err)
			}
		})
	}
}

// TestForwardPlainTrailers: trailers of a chunked answer reach the client.
// Control: the body before them arrives whole.
func TestForwardPlainTrailers(t *testing.T) {
	up := rawUpstream(t, func(conn *net.TCPConn) {
		if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
			return
		}
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"+
			"4\r\nbody\r\n0\r\nX-Sum: 42\r\n\r\n")
	})
	pt := startProxy(t, Config{Allow: []string{up.Addr().String() + ":*"}})
	conn := pt.conn(t)
	fmt.Fprintf(conn, "GET http://%s/x HTTP/1.1\r\nHost: %s\r\nTE: trailers\r\n\r\n", up, up)
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodGet})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "body" {
		t.Fatalf("body %q, %v", b, err)
	}
	if got := resp.Trailer.Get("X-Sum"); got != "42" {
		t.Errorf("trailer X-Sum %q, want 42 (trailers %v)", got, resp.Trailer)
	}
}

// TestPlainForwardable: which requests forwardPlain takes.
func TestPlainForwardable(t *testing.T) {
	s := &session{}
	for _, c := range []struct {
		req  string
		want bool
	}{
		{"GET http://h/x?a=1&b=%20 HTTP/1.1\r\nHost: h\r\n\r\n", true},
		{"HEAD http://h/x HTTP/1.1\r\nHost: h\r\n\r\n", true},
		{"POST http://h/x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx", false},
		{"DELETE http://h/x HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"GET http://h/x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx", false},
		{"GET http://h/x HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", false},
		{"GET http://h/x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n", false},
		{"GET http://h/x?a=1;b=2 HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"GET http://h/x?a=%zz HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"GET https://h/x HTTP/1.1\r\nHost: h\r\n\r\n", false},
	} {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(c.req)))
		if err != nil {
			t.Fatal(err)
		}
		if r.Body != nil && r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
			r.Body = http.NoBody // as the server gives it
		}
		if got := s.plainForwardable(r); got != c.want {
			t.Errorf("%q: %v, want %v", strings.SplitN(c.req, "\r\n", 2)[0], got, c.want)
		}
	}
}
