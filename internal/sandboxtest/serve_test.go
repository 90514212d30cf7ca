package sandboxtest

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestEchoSocket: what a client writes comes back, then EOF after the
// client's own; a connection still open when the test ends is closed by
// the cleanup (its handler returned: the cleanup waits for it).
func TestEchoSocket(t *testing.T) {
	var idle net.Conn
	t.Run("serve", func(t *testing.T) {
		sock := EchoSocket(t, t.TempDir())
		c, err := net.DialTimeout("unix", sock, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "back"); err != nil {
			t.Fatal(err)
		}
		c.(*net.UnixConn).CloseWrite()
		if got, err := io.ReadAll(c); string(got) != "back" || err != nil {
			t.Fatalf("read %q, %v; want the echo, then EOF", got, err)
		}
		idle, err = net.DialTimeout("unix", sock, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(idle, "x"); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		idle.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(idle, b); err != nil { // accepted and echoing
			t.Fatal(err)
		}
	})
	if idle == nil {
		return
	}
	defer idle.Close()
	idle.SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the test ended: read %d bytes, %v; want EOF (the server closed the connection)", n, err)
	}
}
