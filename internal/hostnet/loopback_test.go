//go:build unix

package hostnet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/refusals"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/proxy"
)

// anySocket accepts every existing socket: the tests check what
// StartLoopback does with the check's answer, not the platform's check.
func anySocket(flag, path, fix string) error {
	if fi, err := os.Stat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("%s %s: not a socket; fix: %s", flag, path, fix)
	}
	return nil
}

// roundTrip writes line to 127.0.0.1:port and reads one line back.
func roundTrip(t *testing.T, port uint16, line string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v (got %q)", err, got)
	}
	return got
}

// TestLoopbackNone: without a proxy or an LLM socket no port is held and
// the command is pointed offline.
func TestLoopbackNone(t *testing.T) {
	l, err := StartLoopback(context.Background(), policy.Policy{}, LoopbackConfig{RunID: "r1", CheckSocket: anySocket})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Mode != "none" || l.ProxyPort != 0 || l.LLMPort != 0 || l.Counts() != nil {
		t.Errorf("mode %q, ports %d/%d, counts %v; want none of them", l.Mode, l.ProxyPort, l.LLMPort, l.Counts())
	}
	if l.Env["GIT_TERMINAL_PROMPT"] != "0" || l.Env["HTTP_PROXY"] != "" {
		t.Errorf("env %v: want the offline variables and no proxy", l.Env)
	}
}

// TestLoopbackRelays: a node socket is reached through the loopback port,
// the egress relay naming the run first; the LLM relay passes bytes as
// they are. After Close the ports are gone.
func TestLoopbackRelays(t *testing.T) {
	egress, llmSock := sandboxtest.EchoSocket(t, t.TempDir()), sandboxtest.EchoSocket(t, t.TempDir())
	p := policy.Policy{EgressSocket: egress, LLMSocket: llmSock}
	l, err := StartLoopback(context.Background(), p, LoopbackConfig{RunID: "r1", CheckSocket: anySocket})
	if err != nil {
		t.Fatal(err)
	}
	if want := "proxy (socket " + egress + ")"; l.Mode != want {
		t.Errorf("mode %q, want %q", l.Mode, want)
	}
	if got := roundTrip(t, l.ProxyPort, "hello\n"); got != proxy.RunIDPreamble+"r1\r\n" {
		t.Errorf("the egress relay's first line %q; want the run's name", got)
	}
	if got := roundTrip(t, l.LLMPort, "hello\n"); got != "hello\n" {
		t.Errorf("the LLM relay returned %q; want the bytes as sent", got)
	}
	if want := fmt.Sprintf("http://127.0.0.1:%d", l.ProxyPort); l.Env["HTTPS_PROXY"] != want {
		t.Errorf("HTTPS_PROXY %q, want %q", l.Env["HTTPS_PROXY"], want)
	}
	l.Close()
	l.Close() // idempotent
	for _, port := range []uint16{l.ProxyPort, l.LLMPort} {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			c.Close()
			t.Errorf("port %d still accepts after Close", port)
		}
	}
}

// TestLoopbackProxyRefusal: the built-in proxy refuses an unlisted host,
// tells the collector, and counts it; the count is final after Close.
// Control: the same request names a host on the list and is not refused
// by the list (it fails later, dialling an address that does not exist).
func TestLoopbackProxyRefusal(t *testing.T) {
	col := refusals.New(nil)
	p := policy.Policy{AllowHosts: []string{"allowed.invalid:443"}}
	l, err := StartLoopback(context.Background(), p, LoopbackConfig{RunID: "r1", Refusals: col, CheckSocket: anySocket})
	if err != nil {
		t.Fatal(err)
	}
	status := func(host string) int {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", l.ProxyPort), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n", host, host)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("unlisted.invalid"); got != http.StatusForbidden {
		t.Errorf("unlisted host: status %d, want 403", got)
	}
	if got := status("allowed.invalid"); got == http.StatusForbidden {
		t.Errorf("listed host: status 403; want it past the list (control)")
	}
	l.Close()
	if c := l.Counts(); c == nil || c.Refused < 1 {
		t.Errorf("counts %+v; want the refusal counted", c)
	}
	if got := col.List(); len(got) == 0 || !strings.Contains(fmt.Sprint(got), "unlisted.invalid") {
		t.Errorf("refusals %v; want unlisted.invalid", got)
	}
}

// TestLoopbackDualStack: the port is held on ::1 as well, so no other
// process can serve it there; without DualStack only 127.0.0.1 is.
func TestLoopbackDualStack(t *testing.T) {
	if ln, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		sandboxtest.Unavailable(t, "IPv6 loopback ("+err.Error()+")", "configure ::1 on lo")
	} else {
		ln.Close()
	}
	sock := sandboxtest.EchoSocket(t, t.TempDir())
	for _, dual := range []bool{true, false} {
		l, err := StartLoopback(context.Background(), policy.Policy{LLMSocket: sock}, LoopbackConfig{RunID: "r1", CheckSocket: anySocket, DualStack: dual})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp6", fmt.Sprintf("[::1]:%d", l.LLMPort))
		if held := err != nil; held != dual {
			t.Errorf("DualStack %v: ::1 port %d held by the run: %v (%v)", dual, l.LLMPort, held, err)
		}
		if ln != nil {
			ln.Close()
		}
		l.Close()
	}
}

// TestLoopbackFailsClosed: a missing node socket ends the set-up with the
// check's error; --allow-http is refused (no mount namespace to put the
// run's CA in).
func TestLoopbackFailsClosed(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.sock")
	for _, p := range []policy.Policy{{EgressSocket: missing}, {AllowHosts: []string{"a.invalid"}, LLMSocket: missing}} {
		l, err := StartLoopback(context.Background(), p, LoopbackConfig{RunID: "r1", CheckSocket: anySocket})
		if err == nil || l != nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("%+v: %v, %v; want the check's error naming the socket", p, l, err)
		}
	}
	if _, err := StartLoopback(context.Background(), policy.Policy{AllowHTTP: []string{"GET a.invalid/**"}, AllowHosts: []string{"a.invalid"}},
		LoopbackConfig{Mechanism: "landlock", CheckSocket: anySocket}); err == nil {
		t.Error("--allow-http: set up; want it refused (no CA can be put in place)")
	}
}
