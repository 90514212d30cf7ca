package forwarder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// A published port runs the other way from Serve: a client on the host's
// loopback reaches a server inside the sandbox. Nothing outside can
// connect into the sandbox's network namespace, so the sandbox's init
// connects out, to a Unix socket the host side serves (bound in):
//
//  1. init connects first, before the command starts, and writes
//     PublishControl: that connection is the control line. The host side
//     takes the first such connection only.
//  2. For each client the host side accepts on its TCP listener it writes
//     one byte on the control line.
//  3. For each byte init opens a new connection to the socket, writes
//     PublishData, connects to 127.0.0.1:PORT inside and relays. The host
//     side pairs each data connection with the client waiting longest.
//
// Non-guarantee: the command can connect to the bound socket as well and
// offer a data connection; it then answers a waiting client in the
// server's place, which is what a server inside does anyway. It cannot
// take the control line, which init holds from before it starts.
const (
	PublishControl = "C"
	PublishData    = "D"
)

// pairTimeout bounds how long a host client waits for its data
// connection before it is closed.
const pairTimeout = 10 * time.Second

// ServePublished accepts clients on tcp (the host's 127.0.0.1:HOSTPORT)
// and pairs each with a data connection init opens on unix, relaying both
// ways; onConn, when set, is called for each client accepted. It returns
// nil when ctx is done, having closed both listeners and every connection.
func ServePublished(ctx context.Context, tcp, unix net.Listener, onConn func(net.Addr)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { tcp.Close(); unix.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	data := make(chan net.Conn)
	ctl := make(chan net.Conn, 1)
	wg.Add(1)
	go func() { defer wg.Done(); acceptInit(ctx, unix, ctl, data) }()
	var control net.Conn
	select {
	case control = <-ctl:
	case <-ctx.Done():
		return nil
	}
	defer control.Close()
	for {
		c, err := tcp.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("forwarder: publish: accept: %w", err)
		}
		if onConn != nil {
			onConn(c.RemoteAddr())
		}
		if _, err := control.Write([]byte{'n'}); err != nil {
			c.Close()
			return fmt.Errorf("forwarder: publish: control line: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			select {
			case d := <-data:
				defer d.Close()
				stop := context.AfterFunc(ctx, func() { c.Close(); d.Close() })
				defer stop()
				relayPair(c, d)
			case <-time.After(pairTimeout):
			case <-ctx.Done():
			}
		}()
	}
}

// acceptInit reads the first byte of each connection on unix: the first
// control connection goes to ctl, data connections to data.
func acceptInit(ctx context.Context, unix net.Listener, ctl, data chan<- net.Conn) {
	haveControl := false
	for {
		c, err := unix.Accept()
		if err != nil {
			return
		}
		b := make([]byte, 1)
		_ = c.SetReadDeadline(time.Now().Add(pairTimeout))
		if _, err := io.ReadFull(c, b); err != nil {
			c.Close()
			continue
		}
		_ = c.SetReadDeadline(time.Time{})
		switch {
		case string(b) == PublishControl && !haveControl:
			haveControl = true
			ctl <- c
		case string(b) == PublishData:
			select {
			case data <- c:
			case <-time.After(pairTimeout):
				c.Close()
			case <-ctx.Done():
				c.Close()
				return
			}
		default:
			c.Close()
		}
	}
}

// Publish is init's half: it connects the control line to socket now
// (so that it holds it before the command starts) and then, until ctx is
// done, opens a data connection relayed to 127.0.0.1:port for each byte
// the host side writes on it.
func Publish(ctx context.Context, socket string, port int) error {
	d := net.Dialer{Timeout: dialTimeout}
	control, err := d.DialContext(ctx, "unix", socket)
	if err == nil {
		_, err = io.WriteString(control, PublishControl)
	}
	if err != nil {
		return fmt.Errorf("publish %d: %w", port, err)
	}
	go func() {
		defer control.Close()
		context.AfterFunc(ctx, func() { control.Close() })
		b := make([]byte, 1)
		for {
			if _, err := control.Read(b); err != nil {
				return
			}
			go publishOne(ctx, socket, port)
		}
	}()
	return nil
}

// publishOne serves one host client: a data connection to socket relayed
// to the server inside. When the server is not listening the data
// connection is closed, and the host client with it.
func publishOne(ctx context.Context, socket string, port int) {
	d := net.Dialer{Timeout: dialTimeout}
	up, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return
	}
	defer up.Close()
	if _, err := io.WriteString(up, PublishData); err != nil {
		return
	}
	srv, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return
	}
	defer srv.Close()
	relayPair(up, srv)
}

// relayPair copies both ways with half-close until both directions end;
// a failed direction closes both.
func relayPair(a, b net.Conn) {
	errc := make(chan error, 1)
	go func() { errc <- pipe(b, a) }()
	err1 := pipe(a, b)
	if err1 != nil {
		a.Close()
		b.Close()
	}
	if err2 := <-errc; err2 != nil && !errors.Is(err2, net.ErrClosed) {
		a.Close()
		b.Close()
	}
}

// ServeTCP accepts connections on ln (a Unix socket bound into the
// sandbox) and relays each to a new TCP connection to addr on this host
// (a --host-port service). A connection whose dial fails is closed: the
// client sees its connection end, as if the service refused it. It
// returns as Serve does.
func ServeTCP(ctx context.Context, ln net.Listener, addr string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("forwarder: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			d := net.Dialer{Timeout: dialTimeout}
			up, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return
			}
			defer up.Close()
			stop := context.AfterFunc(ctx, func() { c.Close(); up.Close() })
			defer stop()
			relayPair(c, up)
		}()
	}
}
