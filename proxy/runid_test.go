package proxy

import (
	"bufio"
	"context"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunIDPreamble: a node-wide proxy (RunIDFromPreamble) takes each
// connection's run id from its preamble and strips it; without the
// option a preamble is not honoured (it is no HTTP); a connection without
// one gets the proxy's own run id.
func TestRunIDPreamble(t *testing.T) {
	for _, tt := range []struct {
		name     string
		trust    bool
		preamble string
		wantID   string
		wantCode int
	}{
		{"node proxy, preamble", true, "SANDBOX-RUN-ID 0123abcd\r\n", "0123abcd", http.StatusForbidden},
		{"node proxy, none", true, "", "own", http.StatusForbidden},
		{"node proxy, malformed id", true, "SANDBOX-RUN-ID a b\r\n", "own", http.StatusForbidden},
		{"built-in proxy, forged", false, "SANDBOX-RUN-ID forged\r\n", "", http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var audit sandboxtest.SyncBuffer
			px, err := New(Config{Allow: []string{"example.com"}, Audit: &audit, RunID: "own", RunIDFromPreamble: tt.trust})
			if err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(t.TempDir(), "p.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- px.Serve(ctx, ln) }()
			defer func() { cancel(); <-done }()
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write([]byte(tt.preamble + "GET http://not-allowed.test/ HTTP/1.1\r\nHost: not-allowed.test\r\n\r\n"))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantCode)
			}
			if tt.wantID == "" {
				if strings.Contains(audit.String(), "forged") || strings.Contains(audit.String(), "not-allowed.test") {
					t.Errorf("a preamble was honoured by a proxy that does not trust one: %s", audit.String())
				}
				return
			}
			if !strings.Contains(audit.String(), `"run_id":"`+tt.wantID+`"`) {
				t.Errorf("audit %s, want run_id %s", audit.String(), tt.wantID)
			}
		})
	}
}
