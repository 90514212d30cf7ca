package mcp

// Admission of connections to the HTTP transport. A listener that blocks
// Accept at a connection cap (netutil.LimitListener) lets whoever holds
// the connections decide who is served: a few hundred idle connections
// without the token queue every client that has it behind them until
// their header deadline expires, and then they come back. Here Accept
// never waits: a connection is "pending" until one of its requests has
// carried the token, pending connections are capped per remote address
// and in all, and at a cap the oldest pending one is closed to make room.
// A client with the token thus always gets a connection, and keeps it
// once it has shown the token.

import (
	"container/list"
	"context"
	"net"
	"sync"
)

// Caps on pending connections (accepted, no request with the token yet).
const (
	pendingPerAddr = 256
	pendingTotal   = 1024
)

// admission wraps the transport's listener; see the file's comment.
type admission struct {
	net.Listener
	perAddr, total int

	mu      sync.Mutex
	pending *list.List // of *admConn, oldest first
	byAddr  map[string]int
	evicted int // pending connections closed at a cap, in all
}

func newAdmission(ln net.Listener, perAddr, total int) *admission {
	return &admission{Listener: ln, perAddr: perAddr, total: total, pending: list.New(), byAddr: map[string]int{}}
}

// Accept returns the next connection, pending; to make room for it, it
// closes the oldest pending connection of the same address, or of any,
// at the caps.
func (a *admission) Accept() (net.Conn, error) {
	c, err := a.Listener.Accept()
	if err != nil {
		return nil, err
	}
	ac := &admConn{Conn: c, a: a, addr: remoteIP(c)}
	var victims []*admConn
	a.mu.Lock()
	if a.byAddr[ac.addr] >= a.perAddr {
		victims = append(victims, a.oldest(ac.addr))
	}
	if a.pending.Len()-len(victims) >= a.total {
		victims = append(victims, a.oldest(""))
	}
	for _, v := range victims {
		a.forget(v)
		a.evicted++
	}
	ac.elem = a.pending.PushBack(ac)
	a.byAddr[ac.addr]++
	a.mu.Unlock()
	for _, v := range victims {
		v.Conn.Close()
	}
	return ac, nil
}

// oldest is the oldest pending connection from addr ("" for any). Under
// mu, with at least one such connection pending.
func (a *admission) oldest(addr string) *admConn {
	for e := a.pending.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*admConn); addr == "" || c.addr == addr {
			return c
		}
	}
	return nil
}

// forget takes c off the pending list, if it is on it. Under mu.
func (a *admission) forget(c *admConn) {
	if c == nil || c.elem == nil {
		return
	}
	a.pending.Remove(c.elem)
	c.elem = nil
	if a.byAddr[c.addr]--; a.byAddr[c.addr] <= 0 {
		delete(a.byAddr, c.addr)
	}
}

// counts are the pending connections and those closed at a cap so far.
func (a *admission) counts() (pending, evicted int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pending.Len(), a.evicted
}

// admConn is one accepted connection.
type admConn struct {
	net.Conn
	a    *admission
	addr string
	elem *list.Element // on a.pending; nil once trusted or closed (under a.mu)
}

// trust takes the connection off the pending list: a request on it has
// carried the token, so no flood of others may close it.
func (c *admConn) trust() {
	c.a.mu.Lock()
	c.a.forget(c)
	c.a.mu.Unlock()
}

func (c *admConn) Close() error {
	c.trust()
	return c.Conn.Close()
}

func remoteIP(c net.Conn) string {
	if t, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return t.IP.String()
	}
	return c.RemoteAddr().String()
}

// connKey carries a request's *admConn in its context (http.Server's
// ConnContext), so that the handler can trust it.
type connKey struct{}

func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// trustConn marks the connection r came on as having shown the token.
func trustConn(ctx context.Context) {
	if c, ok := ctx.Value(connKey{}).(*admConn); ok {
		c.trust()
	}
}
