package proxy

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"sync"
)

// RunIDPreamble starts the line a sandbox's relay sends on each connection
// to a node-wide proxy before the client's bytes: "SANDBOX-RUN-ID <id>\r\n".
// A proxy with Config.RunIDFromPreamble takes the id for that connection's
// audit lines and strips the line.
const RunIDPreamble = "SANDBOX-RUN-ID "

// maxRunID bounds the id; a longer line is not a preamble.
const maxRunID = 64

// preambleListener wraps accepted connections in preambleConns.
type preambleListener struct{ net.Listener }

func (l preambleListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &preambleConn{Conn: c}, nil
}

// preambleConn strips a leading preamble line and remembers its id. The
// first Read waits for the preamble's first bytes (an HTTP request always
// has more), so Accept never blocks on a slow client.
type preambleConn struct {
	net.Conn
	once  sync.Once
	br    *bufio.Reader
	mu    sync.Mutex
	runID string
}

func (c *preambleConn) Read(b []byte) (int, error) {
	c.once.Do(func() {
		c.br = bufio.NewReaderSize(c.Conn, 4096)
		head, err := c.br.Peek(len(RunIDPreamble))
		if err != nil || !bytes.Equal(head, []byte(RunIDPreamble)) {
			return
		}
		// The preamble's own line end bounds the read (the buffer bounds
		// a line without one); a malformed preamble is dropped, not
		// passed on: it is no HTTP either.
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return
		}
		id := string(bytes.TrimSuffix(line[len(RunIDPreamble):], []byte("\r\n")))
		if validRunID(id) {
			c.mu.Lock()
			c.runID = id
			c.mu.Unlock()
		}
	})
	return c.br.Read(b)
}

// RunID is the id the connection's preamble named, "" when none.
func (c *preambleConn) RunID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runID
}

func validRunID(s string) bool {
	if s == "" || len(s) > maxRunID {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

type connKey struct{}

// connRunID returns the run id of the connection ctx's request came on.
func connRunID(ctx context.Context) string {
	if c, ok := ctx.Value(connKey{}).(*preambleConn); ok {
		return c.RunID()
	}
	return ""
}
