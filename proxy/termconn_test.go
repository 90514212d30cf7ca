package proxy

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// countConn counts the writes that reach the socket.
type countConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// tlsPair is a TLS server over a counted socket (gathered or not) and a
// client that reads everything it is sent into got.
func tlsPair(t *testing.T, gather bool) (w io.Writer, cc *countConn, done <-chan []byte) {
	t.Helper()
	ca, err := newRunCA()
	if err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	cc = &countConn{Conn: a}
	gc := &gatherConn{Conn: cc, bufs: newGatherBufs()}
	srv := tls.Server(gc, &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return ca.leaf("example.test") }})
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	cli := tls.Client(b, &tls.Config{RootCAs: roots, ServerName: "example.test"})
	out := make(chan []byte, 1)
	go func() {
		got, _ := io.ReadAll(cli)
		out <- got
	}()
	if err := srv.Handshake(); err != nil {
		t.Fatal(err)
	}
	if !gather {
		return srv, cc, out
	}
	return newTermConn(srv, gc, newBehindBufs()), cc, out
}

// TestTermConnGathers: a write of many records reaches the socket in one
// write per four records, intact, where crypto/tls alone makes one write
// per record (the control).
func TestTermConnGathers(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), (256<<10)/16)
	for _, gather := range []bool{false, true} {
		w, cc, done := tlsPair(t, gather)
		before := cc.writes.Load()
		if n, err := w.Write(payload); err != nil || n != len(payload) {
			t.Fatalf("gather=%v: write: %d, %v", gather, n, err)
		}
		w.(io.Closer).Close() // sends what is written behind, then close_notify
		writes := cc.writes.Load() - before - 1
		if got := <-done; !bytes.Equal(got, payload) {
			t.Fatalf("gather=%v: the client read %d bytes, not the %d written", gather, len(got), len(payload))
		}
		records := int64(len(payload) / (16 << 10))
		switch {
		case !gather && writes < records:
			t.Fatalf("control: crypto/tls wrote %d records in %d writes; the test cannot tell gathering from not", records, writes)
		case gather && writes > (records+3)/4+1:
			t.Errorf("gathered: %d records in %d writes, want at most %d", records, writes, (records+3)/4+1)
		}
		t.Logf("gather=%v: %d records, %d writes", gather, records, writes)
	}
}

// TestTermConnSmallWrites: a write that fits one record, and writes
// after a gathered one, go out in order and whole.
func TestTermConnSmallWrites(t *testing.T) {
	w, _, done := tlsPair(t, true)
	var want []byte
	for _, n := range []int{10, 100 << 10, 1, 16 << 10, 40 << 10, 3} {
		p := bytes.Repeat([]byte{byte('a' + n%26)}, n)
		want = append(want, p...)
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	w.(io.Closer).Close()
	if got := <-done; !bytes.Equal(got, want) {
		t.Fatalf("the client read %d bytes, want %d in order", len(got), len(want))
	}
}

// TestTermConnWriteBehindError: once the client is gone, a write behind
// fails, at the latest a few writes later (each write waits for room
// behind the one before); the control, with the client reading, writes
// as many without an error.
func TestTermConnWriteBehindError(t *testing.T) {
	payload := bytes.Repeat([]byte("x"), 64<<10)
	for _, gone := range []bool{false, true} {
		w, _, done := tlsPair(t, true)
		tc := w.(*termConn)
		if gone {
			tc.tc.NetConn().(*gatherConn).Conn.(*countConn).Conn.Close()
		}
		var err error
		for i := 0; i < 64 && err == nil; i++ {
			_, err = w.Write(payload)
		}
		switch {
		case !gone && err != nil:
			t.Fatalf("control: a write to a reading client failed: %v", err)
		case gone && err == nil:
			t.Fatal("64 writes of 64 KiB to a closed socket all succeeded")
		}
		tc.Close()
		<-done
	}
}

// TestTermConnConcurrentWrites: writes from many goroutines at once, small
// and large, arrive each whole (never interleaved with another) and all.
func TestTermConnConcurrentWrites(t *testing.T) {
	w, _, done := tlsPair(t, true)
	sizes := []int{100, 300 << 10, 5, 20 << 10, 16<<10 - 1, 64 << 10, 1, 600 << 10}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, n := range sizes {
				if _, err := w.Write(bytes.Repeat([]byte{byte(g*len(sizes) + i + 1)}, n)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	w.(io.Closer).Close()
	got := <-done
	seen := map[byte]int{}
	for len(got) > 0 {
		v, n := got[0], 1
		for n < len(got) && got[n] == v {
			n++
		}
		if _, dup := seen[v]; dup || v == 0 {
			t.Fatalf("write %d arrived in pieces (or is unknown)", v)
		}
		seen[v] = n
		got = got[n:]
	}
	for g := range 8 {
		for i, n := range sizes {
			if v := byte(g*len(sizes) + i + 1); seen[v] != n {
				t.Errorf("write %d: %d bytes arrived, want %d", v, seen[v], n)
			}
		}
	}
}
