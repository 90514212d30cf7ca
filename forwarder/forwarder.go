// Package forwarder is the in-sandbox half of sandbox-run's network path: it
// accepts TCP connections on a loopback listener inside the sandbox and
// relays each one to a Unix socket bound in from outside (the egress proxy,
// the LLM proxy). sandbox-run also runs it outside, on a Unix listener,
// to reach a node-wide proxy's socket by its path for every connection.
//
// # Guarantees
//
//   - Each accepted connection gets its own new connection to the socket;
//     bytes are relayed in both directions unchanged, and a half-close in
//     either direction is passed on (CloseWrite), so request/response
//     protocols that signal the end of a request by EOF work.
//   - Backpressure is end to end: a relay reads only as fast as the other
//     side accepts writes; nothing is buffered beyond one copy buffer per
//     direction.
//   - When the socket cannot be dialed (the proxy outside is down, or its
//     socket is gone), the accepted connection gets a minimal
//     "HTTP/1.1 502 Bad Gateway" response whose body names the socket and
//     the dial error, and is then closed. Every client of the forwarded
//     ports speaks HTTP to them (plain proxy requests, CONNECT, the LLM
//     channel), so the failure reads as a clear error instead of an empty
//     reply. This happens only before any byte was relayed: a relay that
//     was established and then broke is closed (or reset), never answered
//     with bytes the forwarder made up. Serve keeps serving and dials
//     afresh for every new connection.
//   - When Serve returns, the listener and every relayed connection are
//     closed and every goroutine Serve started has finished.
//
// # Non-guarantees
//
//   - The forwarder does not look at the bytes: policy is the job of whatever
//     serves the socket (package proxy for egress). The 502 above is written
//     whatever the client sent; a client that does not speak HTTP reads it
//     as garbage followed by EOF.
//   - Anything that can connect to the listener can use the socket; the
//     sandbox's network namespace is what limits who that is.
//   - Idle connections are not timed out; they last until a peer closes or
//     Serve returns.
package forwarder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

const dialTimeout = 10 * time.Second

// lingerTimeout bounds how long a client that was answered 502 may keep
// sending before its connection is closed. Reading what it sent before
// closing keeps the kernel from resetting the connection (unread data at
// close means RST), which could discard the 502 before the client reads it.
const lingerTimeout = 2 * time.Second

// Serve accepts connections on ln (normally 127.0.0.1:PORT inside the
// sandbox) and relays each, in both directions with half-close, to a new
// connection to the Unix socket at socketPath. It returns nil when ctx is
// done, or the wrapped error when ln fails otherwise; either way ln and
// every relayed connection are closed and all relay goroutines have
// finished before it returns.
func Serve(ctx context.Context, ln net.Listener, socketPath string) error {
	return ServeTagged(ctx, ln, socketPath, nil)
}

// ServeTagged is Serve that writes tag on each connection to socketPath
// before any byte of the client's: how a sandbox's relay names its run to
// a node-wide proxy (proxy.RunIDPreamble). The client cannot write before
// it, so it cannot forge it.
func ServeTagged(ctx context.Context, ln net.Listener, socketPath string, tag []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = make(map[net.Conn]struct{})
		done  bool
	)
	// track registers c; false means Serve is stopping and c was closed.
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if done {
			_ = c.Close()
			return false
		}
		conns[c] = struct{}{}
		return true
	}
	untrack := func(c net.Conn) {
		mu.Lock()
		delete(conns, c)
		mu.Unlock()
		_ = c.Close()
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		_ = ln.Close()
		mu.Lock()
		done = true
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	}()

	var err error
	var backoff time.Duration
	for {
		c, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() != nil {
				break
			}
			var ne net.Error
			if errors.As(aerr, &ne) && ne.Timeout() || isTemporary(aerr) {
				// Out of descriptors and the like: wait and retry, as
				// net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(backoff):
					continue
				case <-ctx.Done():
				}
				break
			}
			err = fmt.Errorf("forwarder: accept: %w", aerr)
			break
		}
		backoff = 0
		if !track(c) {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer untrack(c)
			relay(ctx, c, socketPath, tag, track, untrack)
		}()
	}
	cancel()
	<-stopped
	wg.Wait()
	return err
}

// isTemporary reports the accept errors that go away on their own
// (EMFILE, ENFILE, ECONNABORTED...). net.Error.Temporary is deprecated but
// remains the only portable signal for them.
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// relay connects client to a new connection to socketPath and copies both
// ways until both directions have ended.
func relay(ctx context.Context, client net.Conn, socketPath string, tag []byte, track func(net.Conn) bool, untrack func(net.Conn)) {
	d := net.Dialer{Timeout: dialTimeout}
	up, err := d.DialContext(ctx, "unix", socketPath)
	if err == nil && len(tag) > 0 {
		if _, err = up.Write(tag); err != nil {
			up.Close()
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			badGateway(client, socketPath, err)
		}
		return // client is closed by the caller
	}
	if !track(up) {
		return
	}
	defer untrack(up)

	errc := make(chan error, 1)
	go func() { errc <- pipe(up, client) }()
	err1 := pipe(client, up)
	if err1 != nil {
		// Abort: a full close wakes the other direction's blocked read.
		_ = client.Close()
		_ = up.Close()
	}
	if err2 := <-errc; err2 != nil {
		_ = client.Close()
		_ = up.Close()
	}
}

// badGateway answers client, whose relay could not be set up, with a 502
// that says why, half-closes it and drains what it sends for at most
// lingerTimeout (64 KiB at most) so that closing it does not reset it.
func badGateway(client net.Conn, socketPath string, err error) {
	why := err.Error()
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		why = oe.Err.Error() // "connect: connection refused", not the address again
	}
	body := fmt.Sprintf("sandbox-run: the proxy socket %s is unreachable (%s): the proxy outside the sandbox is not answering; nothing was forwarded\n", socketPath, why)
	_ = client.SetDeadline(time.Now().Add(lingerTimeout))
	_, werr := fmt.Fprintf(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	if werr != nil {
		return
	}
	if cw, ok := client.(closeWriter); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(client, 64<<10))
}

type closeWriter interface{ CloseWrite() error }

// pipe copies src to dst and then half-closes dst. It returns a non-nil
// error only when the copy failed (not on EOF).
func pipe(dst, src net.Conn) error {
	if _, err := io.Copy(dst, src); err != nil {
		return err
	}
	if cw, ok := dst.(closeWriter); ok {
		if err := cw.CloseWrite(); err != nil {
			return err
		}
		return nil
	}
	return errors.New("forwarder: cannot half-close")
}
