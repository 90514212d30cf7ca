package forwarder_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/forwarder"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// unixServer serves handle on a Unix socket in a temp dir until the test
// ends, and returns the socket path.
func unixServer(t testing.TB, handle func(*net.UnixConn)) string {
	t.Helper()
	return sandboxtest.ServeUnix(t, filepath.Join(t.TempDir(), "s.sock"), func(c net.Conn) { handle(c.(*net.UnixConn)) })
}

// startForwarder runs Serve on a fresh 127.0.0.1 listener and returns its
// address and a stop function that cancels and waits for Serve's result.
func startForwarder(t testing.TB, socketPath string) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- forwarder.Serve(ctx, ln, socketPath) }()
	var once sync.Once
	var serr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case serr = <-errc:
			case <-time.After(10 * time.Second):
				serr = errors.New("Serve did not return within 10s of cancel")
			}
		})
		return serr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), stop
}

func dial(t testing.TB, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c.(*net.TCPConn)
}

// roundTrip writes payload, half-closes, and returns everything read back.
func roundTrip(c *net.TCPConn, payload []byte) ([]byte, error) {
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.CloseWrite()
		}
		errc <- err
	}()
	got, rerr := io.ReadAll(c)
	if werr := <-errc; werr != nil {
		return got, fmt.Errorf("write: %w", werr)
	}
	return got, rerr
}

func TestRelay(t *testing.T) {
	sock := sandboxtest.EchoSocket(t, t.TempDir())
	addr, _ := startForwarder(t, sock)

	tests := []struct {
		name string
		size int
	}{
		{"empty", 0},
		{"one byte", 1},
		{"64KiB", 64 << 10},
		{"10MiB", 10 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload := make([]byte, tt.size)
			rand.Read(payload)
			got, err := roundTrip(dial(t, addr), payload)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(payload) || sha256.Sum256(got) != sha256.Sum256(payload) {
				t.Fatalf("echo of %d bytes came back as %d bytes, or altered", len(payload), len(got))
			}
		})
	}
}

func TestHalfClose(t *testing.T) {
	// The server answers only after it has seen EOF: the client's
	// CloseWrite must reach it, and its reply must still reach the client.
	sock := unixServer(t, func(c *net.UnixConn) {
		n, err := io.Copy(io.Discard, c)
		if err != nil {
			return
		}
		fmt.Fprintf(c, "got %d bytes after EOF", n)
		_ = c.CloseWrite()
	})
	addr, _ := startForwarder(t, sock)

	c := dial(t, addr)
	got, err := roundTrip(c, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "got 5 bytes after EOF"; string(got) != want {
		t.Fatalf("reply = %q, want %q", got, want)
	}

}

func TestServerHalfCloseFirst(t *testing.T) {
	received := make(chan string, 1)
	sock := unixServer(t, func(c *net.UnixConn) {
		_, _ = io.WriteString(c, "banner")
		_ = c.CloseWrite()
		b, _ := io.ReadAll(c)
		received <- string(b)
	})
	addr, _ := startForwarder(t, sock)
	c := dial(t, addr)
	banner, err := io.ReadAll(c) // EOF arrives while our write side stays open
	if err != nil || string(banner) != "banner" {
		t.Fatalf("read %q, %v; want banner then EOF", banner, err)
	}
	if _, err := io.WriteString(c, "still writable"); err != nil {
		t.Fatalf("write after server half-close: %v", err)
	}
	_ = c.CloseWrite()
	select {
	case got := <-received:
		if got != "still writable" {
			t.Fatalf("server received %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server never saw the client's data and EOF")
	}
}

func TestConcurrent(t *testing.T) {
	const conns, size = 50, 256 << 10
	sock := sandboxtest.EchoSocket(t, t.TempDir())
	addr, _ := startForwarder(t, sock)

	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			payload := bytes.Repeat([]byte{byte(i)}, size)
			got, err := roundTrip(c.(*net.TCPConn), payload)
			if err != nil {
				errs <- fmt.Errorf("conn %d: %w", i, err)
				return
			}
			if !bytes.Equal(got, payload) {
				errs <- fmt.Errorf("conn %d: %d bytes back, altered or mixed with another connection", i, len(got))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCancelStopsServe(t *testing.T) {
	serverSaw := make(chan error, 1)
	accepted := make(chan struct{})
	sock := unixServer(t, func(c *net.UnixConn) {
		close(accepted)
		_, err := io.Copy(io.Discard, c) // returns when the relay closes its side
		serverSaw <- err
	})
	addr, stop := startForwarder(t, sock)

	c := dial(t, addr)
	if _, err := c.Write([]byte("x")); err != nil { // an open, idle relay
		t.Fatal(err)
	}
	// The relay must have reached the Unix side before the cancel, or
	// there is no open relay to close.
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay never connected to the Unix socket")
	}
	if err := stop(); err != nil {
		t.Fatalf("Serve after cancel: %v, want nil", err)
	}
	// The relayed connection is closed on both sides ...
	if _, err := io.ReadAll(c); err != nil && !errors.Is(err, net.ErrClosed) {
		var ne net.Error
		if !errors.As(err, &ne) || ne.Timeout() {
			t.Fatalf("client read after Serve returned: %v, want EOF or reset", err)
		}
	}
	select {
	case <-serverSaw:
	case <-time.After(10 * time.Second):
		t.Fatal("the Unix side of the relay stayed open after Serve returned")
	}
	// ... and the listener is closed.
	if c2, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c2.Close()
		t.Fatal("listener still accepts after Serve returned")
	}
}

// readBadGateway parses what the forwarder answered on c and fails unless
// it is the 502 that names the socket, with nothing after it.
func readBadGateway(t *testing.T, c net.Conn, sock string) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no HTTP response from a relay whose socket is unreachable: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the 502 body: %v", err)
	}
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %q, want 502 Bad Gateway", resp.Status)
	}
	for _, want := range []string{"proxy socket " + sock, "unreachable"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("body %q lacks %q", body, want)
		}
	}
}

func TestSocketUnreachable(t *testing.T) {
	// A socket file that nobody serves any more (a proxy that was killed)
	// and a socket that was removed: both are answered 502.
	dead := filepath.Join(t.TempDir(), "dead.sock")
	l, err := net.Listen("unix", dead)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	tests := []struct {
		name, sock, request string
	}{
		{"refused/plain proxy request", dead, "GET http://example.test/ HTTP/1.1\r\nHost: example.test\r\n\r\n"},
		{"refused/CONNECT", dead, "CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n"},
		{"missing/plain proxy request", filepath.Join(t.TempDir(), "absent.sock"), "GET http://example.test/ HTTP/1.1\r\nHost: example.test\r\n\r\n"},
		// The request has not ended (no blank line) and the client keeps
		// its write side open: the answer still comes, and the connection
		// ends after it.
		{"missing/request still being sent", filepath.Join(t.TempDir(), "absent.sock"), "POST http://example.test/ HTTP/1.1\r\nContent-Length: 100000\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, _ := startForwarder(t, tt.sock)
			// Twice: Serve keeps serving and dials afresh each time.
			for range 2 {
				c := dial(t, addr)
				if _, err := io.WriteString(c, tt.request); err != nil {
					t.Fatal(err)
				}
				readBadGateway(t, c, tt.sock)
			}
		})
	}
}

func TestSocketUnreachableLargeRequest(t *testing.T) {
	// The client sends a 32 KiB body before it reads, which the forwarder
	// never relays: the 502 still arrives whole (the forwarder reads what
	// the client sent before closing, so that the close is not a reset).
	sock := filepath.Join(t.TempDir(), "absent.sock")
	addr, _ := startForwarder(t, sock)
	c := dial(t, addr)
	body := bytes.Repeat([]byte("x"), 32<<10)
	req := fmt.Sprintf("POST http://example.test/ HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	readBadGateway(t, c, sock)
}

func TestSocketComesBack(t *testing.T) {
	// The proxy is restarted at the same path: the next connection is
	// relayed again.
	sock := filepath.Join(t.TempDir(), "s.sock")
	addr, _ := startForwarder(t, sock)
	c := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\n\r\n")
	readBadGateway(t, c, sock)
	sandboxtest.ServeUnix(t, sock, sandboxtest.Echo)
	got, err := roundTrip(dial(t, addr), []byte("back"))
	if err != nil || string(got) != "back" {
		t.Fatalf("after the socket came back: %q, %v; want the echo", got, err)
	}
}

func TestBrokenRelayIsNotAnswered(t *testing.T) {
	// The server sends part of a response and dies: the client gets those
	// bytes and then the end of the connection, never a 502 made up by
	// the forwarder in the middle of the server's bytes.
	const partial = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial"
	sock := unixServer(t, func(c *net.UnixConn) {
		buf := make([]byte, 512)
		c.Read(buf)
		io.WriteString(c, partial)
		// c is closed by unixServer: the server is gone mid-response.
	})
	addr, _ := startForwarder(t, sock)
	c := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\n\r\n")
	got, _ := io.ReadAll(c) // EOF or a reset: either ends the relay
	if string(got) != partial {
		t.Fatalf("client read %q, want exactly the server's bytes %q", got, partial)
	}
}

func BenchmarkForwarder(b *testing.B) {
	const chunk = 1 << 20
	sock := sandboxtest.EchoSocket(b, b.TempDir())
	addr, _ := startForwarder(b, sock)
	c := dial(b, addr)
	_ = c.SetDeadline(time.Time{})
	buf := make([]byte, chunk)
	rand.Read(buf)
	back := make([]byte, chunk)

	b.SetBytes(chunk) // bytes relayed each way per iteration
	b.ReportAllocs()
	for b.Loop() {
		errc := make(chan error, 1)
		go func() { _, err := c.Write(buf); errc <- err }()
		if _, err := io.ReadFull(c, back); err != nil {
			b.Fatal(err)
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
}

// TestServeTaggedWritesTagFirst: the upstream reads the tag, then the
// client's bytes, on every connection; Serve writes no tag (the control).
func TestServeTaggedWritesTagFirst(t *testing.T) {
	sock := sandboxtest.EchoSocket(t, t.TempDir())
	for _, tag := range []string{"TAG 42\r\n", ""} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			if tag == "" {
				errc <- forwarder.Serve(ctx, ln, sock)
			} else {
				errc <- forwarder.ServeTagged(ctx, ln, sock, []byte(tag))
			}
		}()
		for range 2 {
			got, err := roundTrip(dial(t, ln.Addr().String()), []byte("hello"))
			if err != nil || string(got) != tag+"hello" {
				t.Errorf("tag %q: echoed %q, %v", tag, got, err)
			}
		}
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}
