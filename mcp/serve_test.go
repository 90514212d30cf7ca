package mcp

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/policy"
)

// TestServeSilentAfterReturn: once Serve has returned for a sandbox that
// could not be set up, a request the client sends late is its caller's to
// answer (the CLI does, with the reason): the relay, still reading the
// client, must not answer it too. Before the fix it wrote "the MCP server
// has ended" there, and the client got two answers for one id.
func TestServeSilentAfterReturn(t *testing.T) {
	w := sandboxtest.WorkDir(t)
	p := policy.Policy{Workdir: w, Write: []string{w + "/absent"}}
	inR, inW := io.Pipe()
	defer inW.Close()
	out := &syncBuffer{}
	res, err := Serve(context.Background(), p, []string{"true"}, inR, out, Options{})
	if res != nil || err == nil {
		t.Fatalf("Serve = %v, %v; want no result and the set-up error", res, err)
	}
	// io.Pipe hands the line over only when the relay's reader takes it.
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	inW.Close()
	// The relay's answer, when there was one, came within microseconds of
	// reading the line; a second is ample.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		out.mu.Lock()
		got := out.b.String()
		out.mu.Unlock()
		if got != "" {
			t.Fatalf("the relay wrote %q after Serve returned; want nothing", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
