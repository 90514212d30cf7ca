package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestServeShutdownEndsHalfClosedTunnel: a tunnel whose upstream has
// already half-closed (it answered and shut down its sending side) is
// still ended when Serve returns: the client's end is closed too, not left
// to the client. The control is the same tunnel before the shutdown,
// which still carries the client's bytes.
func TestServeShutdownEndsHalfClosedTunnel(t *testing.T) {
	got := make(chan string, 4)
	up := rawUpstream(t, func(c *net.TCPConn) {
		io.WriteString(c, "hello\n")
		c.CloseWrite()
		b := make([]byte, 64)
		for {
			n, err := c.Read(b)
			if n > 0 {
				got <- string(b[:n])
			}
			if err != nil {
				return
			}
		}
	})
	p, err := New(Config{Allow: []string{up.Addr().String() + ":*"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ln, err := net.Listen("unix", dir+"/p.sock")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.Serve(ctx, ln) }()
	c, err := net.DialTimeout("unix", dir+"/p.sock", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", up, up)
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	if line, err := br.ReadString('\n'); line != "hello\n" {
		t.Fatalf("greeting: %q %v", line, err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the upstream's half-close: %v, want EOF", err)
	}
	io.WriteString(c, "ping")
	select {
	case s := <-got:
		if s != "ping" {
			t.Fatalf("control: the upstream read %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("control: the half-closed tunnel did not carry the client's bytes")
	}

	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Serve = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	// The proxy's end of the client connection is closed: the socket
	// hangs up (POLLHUP; a half-close alone does not raise it). Nothing is
	// written, which would make the proxy notice on its own.
	hup := false
	for i := 0; i < 100 && !hup; i++ {
		hup = hungUp(t, c)
		time.Sleep(20 * time.Millisecond)
	}
	if !hup {
		t.Fatal("the client's end of the tunnel is still open after Serve returned")
	}
}

// hungUp reports whether the peer of c has closed its end entirely.
func hungUp(t *testing.T, c net.Conn) bool {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var revents int16
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
		if _, err := unix.Poll(fds, 0); err == nil {
			revents = fds[0].Revents
		}
	})
	return revents&unix.POLLHUP != 0
}
