//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
)

// The floor of any relay on this machine: a bare TCP relay that accepts a
// connection, dials the test host and copies both ways (io.Copy between
// TCP connections, which Go does with splice: no byte crosses into user
// space). No HTTP, no policy, no pool. Whatever sandbox-run's proxy or its
// netstack does, a path that relays the bytes through a third process on
// the machine's cores does at least this much; measured in the same
// interleaved rounds, it says how much of a path's cost is relaying at all
// and how much is the relay's own.

// Names of the relay paths.
const (
	nRelay = "bare TCP relay (splice, no HTTP, no policy: the floor of any relay here)"
	lRelay = "bare relay (Unix socket, splice, no HTTP: the floor of any relay here)"
)

// relayMain is the hidden mode `relay LISTEN UPSTREAM`: LISTEN is "tcp"
// (a loopback port of its choosing) or the path of a Unix socket to make.
// It prints the address it listens on, relays every connection to the TCP
// address UPSTREAM, and exits when stdin closes.
func relayMain(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: relay tcp|SOCKET UPSTREAM")
		return 2
	}
	network, addr := "unix", args[0]
	if addr == "tcp" {
		network, addr = "tcp", "127.0.0.1:0"
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel(); ln.Close() }()
	fmt.Println(ln.Addr())
	var wg sync.WaitGroup
	for ctx.Err() == nil {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		wg.Go(func() { relayOne(ctx, c, args[1]) })
	}
	wg.Wait()
	return 0
}

// relayOne copies c to a new connection to upstream and back, each way
// until its end of file (then a half-close), and closes both.
func relayOne(ctx context.Context, c net.Conn, upstream string) {
	defer c.Close()
	var d net.Dialer
	u, err := d.DialContext(ctx, "tcp", upstream)
	if err != nil {
		return
	}
	defer u.Close()
	stop := context.AfterFunc(ctx, func() { c.Close(); u.Close() })
	defer stop()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(u, c)
		_ = u.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(c, u)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	<-done
}

// startRelay starts `relay LISTEN UPSTREAM` as a child process; its addr
// is where it listens.
func startRelay(exe, listen, upstream string) (*tcpProxy, error) {
	return startLineChild(exe, "relay", listen, upstream)
}

// relayVariant fetches through the bare relay r the way nProxy fetches
// through the proxy (HTTP_PROXY: the same client, the same requests).
func (e *env) relayVariant(r *tcpProxy) netVariant {
	clean := envWithout(os.Environ(), "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
	return netVariant{nRelay, func(ctx context.Context, a []string) *exec.Cmd {
		c := exec.CommandContext(ctx, e.exe, append([]string{"fetch"}, a...)...)
		c.Env = append(clean, "HTTP_PROXY=http://"+r.addr)
		return c
	}}
}
