package proxy

import (
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// The connections of a terminated exchange carry every byte twice through
// TLS, and crypto/tls writes each record (16 KiB at most) with its own
// write call; a response copied in large pieces would cost one system call
// per record. The types here gather the records of one tls.Conn.Write and
// send them with one write, and read ahead from the socket so that one
// read call yields many records.

// gatherConn is the socket under a tls.Conn. Between begin and end, the
// records crypto/tls writes are gathered, up to gatherSize bytes a write,
// and sent by end (or when the next record would overflow the buffer);
// outside, each write goes straight to the socket. crypto/tls serialises
// its writes (one lock for every record, alert and handshake message), so
// a write from another goroutine between a tls.Conn.Write and end (an
// alert from Close) is gathered after the records it follows, or waits
// for end: the order on the wire is the order of the writes. A connection
// holds a buffer only while it gathers.
type gatherConn struct {
	net.Conn
	bufs   *sync.Pool // of *[]byte, gatherSize capacity (newGatherBufs)
	mu     sync.Mutex
	gather bool
	buf    *[]byte // from bufs while gathering
}

// gatherSize bounds the bytes gathered into one write: four full TLS
// records and their overhead.
const gatherSize = 4 * (16<<10 + 256)

// newGatherBufs is the buffer pool of the gatherConns of one terminator.
func newGatherBufs() *sync.Pool {
	return &sync.Pool{New: func() any { b := make([]byte, 0, gatherSize); return &b }}
}

func (c *gatherConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.gather {
		return c.Conn.Write(p)
	}
	if c.buf == nil {
		c.buf = c.bufs.Get().(*[]byte)
	}
	if len(*c.buf)+len(p) > gatherSize {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > gatherSize {
			return c.Conn.Write(p)
		}
	}
	*c.buf = append(*c.buf, p...)
	return len(p), nil
}

func (c *gatherConn) begin() {
	c.mu.Lock()
	c.gather = true
	c.mu.Unlock()
}

// end sends what was gathered since begin, and stops gathering.
func (c *gatherConn) end() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gather = false
	err := c.flushLocked()
	if c.buf != nil {
		c.bufs.Put(c.buf)
		c.buf = nil
	}
	return err
}

func (c *gatherConn) flushLocked() error {
	if c.buf == nil || len(*c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(*c.buf)
	*c.buf = (*c.buf)[:0]
	return err
}

// termConn is a terminated client connection after its handshake: a
// tls.Conn whose Write sends the records of each call in one write. It
// is not a *tls.Conn and has no ConnectionState: http.Server serves it as
// a plain connection (HTTP/2 by its preface, see newTerminator), while
// termConnH1 adds ConnectionState for HTTP/1.1, so that Request.TLS is
// set.
type termConn struct {
	tc  *tls.Conn
	raw *gatherConn
}

func (c *termConn) Read(b []byte) (int, error) { return c.tc.Read(b) }

// Write sends b as crypto/tls does, in as few writes to the socket as
// gatherConn allows: one per four records. A b that fits one record is
// written as it is.
func (c *termConn) Write(b []byte) (int, error) {
	if len(b) <= 16<<10 {
		return c.tc.Write(b)
	}
	c.raw.begin()
	n, err := c.tc.Write(b)
	if ferr := c.raw.end(); err == nil && ferr != nil {
		return 0, ferr
	}
	return n, err
}

func (c *termConn) Close() error                       { return c.tc.Close() }
func (c *termConn) LocalAddr() net.Addr                { return c.tc.LocalAddr() }
func (c *termConn) RemoteAddr() net.Addr               { return c.tc.RemoteAddr() }
func (c *termConn) SetDeadline(t time.Time) error      { return c.tc.SetDeadline(t) }
func (c *termConn) SetReadDeadline(t time.Time) error  { return c.tc.SetReadDeadline(t) }
func (c *termConn) SetWriteDeadline(t time.Time) error { return c.tc.SetWriteDeadline(t) }

// termConnH1 is a termConn that negotiated HTTP/1.1 (or nothing).
type termConnH1 struct{ *termConn }

func (c termConnH1) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }
