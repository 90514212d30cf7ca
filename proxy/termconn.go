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
// tls.Conn written behind (writeBehind), whose large writes go to the
// socket in one write per four records (gatherConn). It is not a
// *tls.Conn and has no ConnectionState: http.Server serves it as a plain
// connection (HTTP/2 by its preface, see newTerminator), while termConnH1
// adds ConnectionState for HTTP/1.1, so that Request.TLS is set.
type termConn struct {
	tc  *tls.Conn
	raw *gatherConn
	w   writeBehind
}

func newTermConn(tc *tls.Conn, raw *gatherConn, bufs *sync.Pool) *termConn {
	c := &termConn{tc: tc, raw: raw}
	c.w.c, c.w.bufs = c, bufs
	c.w.space.L = &c.w.mu
	return c
}

func (c *termConn) Read(b []byte) (int, error) { return c.tc.Read(b) }

// Write hands b to writeBehind (see there).
func (c *termConn) Write(b []byte) (int, error) { return c.w.write(b) }

// send encrypts b and writes it to the socket: a b that fits one record
// as crypto/tls writes it, a larger one gathered.
func (c *termConn) send(b []byte) error {
	if len(b) <= 16<<10 {
		_, err := c.tc.Write(b)
		return err
	}
	c.raw.begin()
	_, err := c.tc.Write(b)
	if ferr := c.raw.end(); err == nil {
		err = ferr
	}
	return err
}

// Close sends what is still buffered (waiting at most closeFlushTimeout
// for a client that does not read), then closes the tls.Conn, which sends
// its close_notify.
func (c *termConn) Close() error {
	c.w.close()
	return c.tc.Close()
}

func (c *termConn) LocalAddr() net.Addr                { return c.tc.LocalAddr() }
func (c *termConn) RemoteAddr() net.Addr               { return c.tc.RemoteAddr() }
func (c *termConn) SetDeadline(t time.Time) error      { return c.tc.SetDeadline(t) }
func (c *termConn) SetReadDeadline(t time.Time) error  { return c.tc.SetReadDeadline(t) }
func (c *termConn) SetWriteDeadline(t time.Time) error { return c.tc.SetWriteDeadline(t) }

// termConnH1 is a termConn that negotiated HTTP/1.1 (or nothing).
type termConnH1 struct{ *termConn }

func (c termConnH1) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }

// writeBehind is a termConn's writer. An HTTP/2 server writes a response
// one frame (16 KiB for most clients) at a time, each write waiting for
// the last; written through, each frame is two TLS records (the frame
// header makes it a few bytes longer than one) and a write to the socket,
// and the next frame waits for it. Here a write of at least one record's
// size is copied into a buffer (at most maxBehind bytes; a write that
// finds it full waits for room) and returns; one goroutine at a time, made
// when there is something to send, encrypts and sends everything buffered,
// in as few records and socket writes as it can, and ends when the buffer
// is empty. A smaller write, when nothing is buffered or being sent, is
// written through (one record, at once, no goroutine), as are the
// requests' small answers.
//
// Bytes go out in the order of the writes, each write's whole, as a
// tls.Conn's (concurrent writes wait for each other). A write may return before its
// bytes are on the socket, as a kernel's socket buffer would: an error
// sending them is returned by every later write, and by none earlier.
type writeBehind struct {
	c     *termConn
	bufs  *sync.Pool // of *[]byte, maxBehind capacity
	wmu   sync.Mutex // held by a write from start to end: writes never interleave
	mu    sync.Mutex
	space sync.Cond // on mu: room in the buffer, the sender done, or an error
	buf   *[]byte   // written and not yet taken by the sender; nil when none
	busy  bool      // a sender (goroutine or write-through) is sending
	err   error     // the first error sending, or net.ErrClosed after close
}

// maxBehind bounds the bytes a termConn buffers: sixteen records.
const maxBehind = 256 << 10

// closeFlushTimeout bounds how long close waits for buffered bytes to go
// out (crypto/tls waits as long for its close_notify).
const closeFlushTimeout = 5 * time.Second

func newBehindBufs() *sync.Pool {
	return &sync.Pool{New: func() any { b := make([]byte, 0, maxBehind); return &b }}
}

func (w *writeBehind) write(b []byte) (int, error) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.mu.Lock()
	if w.err == nil && !w.busy && w.buf == nil && len(b) < 16<<10 {
		w.busy = true
		w.mu.Unlock()
		err := w.c.send(b)
		w.mu.Lock()
		if err == nil && w.buf != nil {
			go w.sendAll() // another goroutine wrote behind this one: still busy
		} else {
			w.done(err)
		}
		w.mu.Unlock()
		if err != nil {
			return 0, err
		}
		return len(b), nil
	}
	defer w.mu.Unlock()
	n := 0
	for len(b) > 0 {
		for w.err == nil && w.buf != nil && len(*w.buf) == maxBehind {
			w.space.Wait()
		}
		if w.err != nil {
			return n, w.err
		}
		if w.buf == nil {
			w.buf = w.bufs.Get().(*[]byte)
		}
		k := min(len(b), maxBehind-len(*w.buf))
		*w.buf = append(*w.buf, b[:k]...)
		b, n = b[k:], n+k
		if !w.busy {
			w.busy = true
			go w.sendAll()
		}
	}
	return n, nil
}

// sendAll is the sender: it sends the buffer until it finds it empty.
func (w *writeBehind) sendAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.buf != nil && w.err == nil {
		b := w.buf
		w.buf = nil
		w.space.Broadcast()
		w.mu.Unlock()
		err := w.c.send(*b)
		*b = (*b)[:0]
		w.bufs.Put(b)
		w.mu.Lock()
		if err != nil {
			w.err = err
		}
	}
	w.done(nil)
}

// done ends a send (mu held): records err, drops what can no longer be
// sent, and wakes the writers and close.
func (w *writeBehind) done(err error) {
	if err != nil && w.err == nil {
		w.err = err
	}
	if w.err != nil && w.buf != nil {
		*w.buf = (*w.buf)[:0]
		w.bufs.Put(w.buf)
		w.buf = nil
	}
	w.busy = false
	w.space.Broadcast()
}

// close waits until what was written is sent (or sending failed), at most
// closeFlushTimeout, and makes every later write fail with net.ErrClosed.
func (w *writeBehind) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy && w.err == nil {
		_ = w.c.tc.SetWriteDeadline(time.Now().Add(closeFlushTimeout))
	}
	for w.busy && w.err == nil {
		w.space.Wait()
	}
	if w.err == nil {
		w.err = net.ErrClosed
	}
}
