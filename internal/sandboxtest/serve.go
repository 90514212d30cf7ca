package sandboxtest

import (
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Serve accepts connections on ln until t ends, running handle on each in
// a goroutine of its own and closing the connection when handle returns.
// When t ends ln is closed, and so is every connection still open, and
// Serve waits for its goroutines: handle must return once its connection
// is closed. A handler still running 30 seconds later fails t rather than
// hang it.
func Serve(t testing.TB, ln net.Listener, handle func(net.Conn)) {
	t.Helper()
	var (
		mu     sync.Mutex
		open   = map[net.Conn]bool{}
		ending bool
		wg     sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // ln is closed
			}
			mu.Lock()
			if ending {
				mu.Unlock()
				c.Close()
				return
			}
			open[c] = true
			wg.Add(1)
			mu.Unlock()
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(open, c)
					mu.Unlock()
					c.Close()
				}()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		ending = true
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("sandboxtest: a connection handler on %s did not return 30s after its connection was closed", ln.Addr())
		}
	})
}

// ServeUnix listens on the Unix socket path and serves handle there
// (Serve) until t ends; it returns path. The socket's mode is what the
// umask leaves: a caller whose sandbox connects as another uid chmods it
// (and puts it in a directory that uid may search). A path is at most
// 107 bytes on Linux, 103 on macOS (sun_path).
func ServeUnix(t testing.TB, path string, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("sandboxtest: listen on %s (%d bytes): %v", path, len(path), err)
	}
	Serve(t, ln, handle)
	return path
}

// Echo sends back everything it reads from c and, after the peer's EOF,
// closes its own writing side, so that the peer reads EOF in turn.
func Echo(c net.Conn) {
	if _, err := io.Copy(c, c); err == nil {
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}
}

// EchoSocket serves Echo on the Unix socket dir/echo.sock (ServeUnix)
// until t ends, and returns its path.
func EchoSocket(t testing.TB, dir string) string {
	t.Helper()
	return ServeUnix(t, filepath.Join(dir, "echo.sock"), Echo)
}
