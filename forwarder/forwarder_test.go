package forwarder_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/forwarder"
)

// unixServer serves handle on a Unix socket in a temp dir until the test
// ends, and returns the socket path.
func unixServer(t testing.TB, handle func(*net.UnixConn)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c.(*net.UnixConn))
			}()
		}
	}()
	return path
}

// echo copies everything back and half-closes after EOF.
func echo(c *net.UnixConn) {
	if _, err := io.Copy(c, c); err == nil {
		_ = c.CloseWrite()
	}
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
	sock := unixServer(t, echo)
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
	sock := unixServer(t, echo)
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

func TestSocketMissing(t *testing.T) {
	addr, _ := startForwarder(t, filepath.Join(t.TempDir(), "absent.sock"))
	c := dial(t, addr)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if len(b) != 0 {
		t.Fatalf("read %q from a relay whose socket is missing", b)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection left open although the socket is missing")
	}
	// Serve keeps serving: a second connection gets the same treatment.
	c2 := dial(t, addr)
	if b, _ := io.ReadAll(c2); len(b) != 0 {
		t.Fatalf("second connection read %q", b)
	}
}

func BenchmarkForwarder(b *testing.B) {
	const chunk = 1 << 20
	sock := unixServer(b, echo)
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
