package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// canary is a TCP listener on host loopback that counts connections.
type canary struct {
	ln    net.Listener
	count atomic.Int64
}

func newCanary(t *testing.T, network, addr string) *canary {
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &canary{ln: ln}
	sandboxtest.Serve(t, ln, func(conn net.Conn) {
		c.count.Add(1)
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 4096)
		conn.Read(buf) // the request line, so that the client is not reset
		io.WriteString(conn, "HTTP/1.0 200 OK\r\nContent-Length: 14\r\n\r\nCANARY-REACHED")
	})
	return c
}

func (c *canary) port() int { return c.ln.Addr().(*net.TCPAddr).Port }

// chownSocket hands a socket to the sandbox's uid when the test is root, as
// an operator does for a node proxy.
func chownSocket(t *testing.T, p string) {
	if os.Geteuid() == 0 {
		os.Chown(p, 65534, 65534)
		os.Chown(filepath.Dir(p), 65534, 65534)
	}
}

func TestEgressThroughSandbox(t *testing.T) {
	needBwrap(t)
	egressThrough(t)
}

// TestEgressThroughGvisor: the same attempts, controls and audit under
// tier 2: the proxy and the forwarder are the same, only the sandbox
// around them is gVisor's.
func TestEgressThroughGvisor(t *testing.T) {
	sandboxtest.Runsc(t)
	egressThrough(t, "--sandbox", "gvisor")
}

func egressThrough(t *testing.T, mode ...string) {
	sandboxtest.Root(t) // the test host lives in a network namespace only root can wire up
	h := sandboxtest.NewTestHost(t, 1)
	c4 := newCanary(t, "tcp4", "127.0.0.1:0")
	port := c4.port()
	w := sandboxtest.WorkDir(t)
	audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
	allow := append([]string{"--allow-host", h.HostPort(), "--audit", audit}, mode...)

	// Positive controls: the canary answers a direct connection, and so
	// does the test host.
	if conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		t.Fatalf("control: canary unreachable (untested): %v", err)
	} else {
		conn.Close()
	}
	// The control's connection is counted when the canary accepts it,
	// which may come after Dial returns: wait for it before the baseline.
	for i := 0; i < 200 && c4.count.Load() == 0; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	before := c4.count.Load()
	if h.Count(t) < 0 {
		t.Fatal("control: test host unreachable")
	}

	t.Run("allowed host through HTTP_PROXY and CONNECT", func(t *testing.T) {
		r := sandboxed(t, w, fmt.Sprintf(`curl -sS -m 10 --noproxy '' http://%[1]s/ok; echo; curl -sS -m 10 --noproxy '' --proxytunnel http://%[1]s/ok`, h.HostPort()), allow...)
		if strings.Count(r.stdout, "ok from test host") != 2 {
			t.Fatalf("the allowed host was not reached through the proxy (untested refusals): %q %q", r.stdout, r.stderr)
		}
	})
	t.Run("refused spellings", func(t *testing.T) {
		var script strings.Builder
		for _, host := range []string{"127.0.0.1", "127.1", "0x7f.1", "2130706433", "017700000001", "localhost",
			"[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "0.0.0.0", "[::]", "[64:ff9b::7f00:1]", "[2002:7f00:1::]",
			"169.254.169.254", "[fd00:ec2::254]"} {
			fmt.Fprintf(&script, "echo %s $(curl -s -m 10 --noproxy '' -o /dev/null -w '%%{http_code}' http://%s:%d/)\n", host, host, port)
		}
		r := sandboxed(t, w, script.String(), allow...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 15 {
			t.Fatalf("output %q %q", r.stdout, r.stderr)
		}
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) != 2 || f[1] != "403" {
				t.Errorf("%s: want 403 from the proxy", l)
			}
		}
		if n := c4.count.Load(); n != before {
			t.Errorf("the loopback canary saw %d connections", n-before)
		}
	})
	t.Run("redirect to loopback", func(t *testing.T) {
		r := sandboxed(t, w, fmt.Sprintf(`curl -s -L -m 10 --noproxy '' -o /dev/null -w '%%{http_code} %%{num_redirects}' 'http://%s/redirect?to=http://127.0.0.1:%d/'`, h.HostPort(), port), allow...)
		if strings.TrimSpace(r.stdout) != "403 1" {
			t.Errorf("redirect: got %q, want the second request refused (403 after 1 redirect)", r.stdout)
		}
		if n := c4.count.Load(); n != before {
			t.Errorf("the loopback canary saw %d connections", n-before)
		}
	})
	t.Run("direct connection ignoring the proxy", func(t *testing.T) {
		r := sandboxed(t, w, fmt.Sprintf(`curl -sS -m 5 --noproxy '*' http://%s/ok && echo ALLOWED-REACHED; curl -sS -m 5 --noproxy '*' http://127.0.0.1:%d/ && echo LOOPBACK-REACHED; true`, h.HostPort(), port), allow...)
		if strings.Contains(r.stdout, "LOOPBACK-REACHED") {
			t.Errorf("a direct connection to the host's loopback got out: %q", r.stdout)
		}
		// Transparent egress carries a direct connection to an allowed
		// host (judged like the proxy's): under bwrap as root (the test
		// host needs root) and under gVisor.
		if !strings.Contains(r.stdout, "ALLOWED-REACHED") {
			t.Errorf("direct connection to the allowed host: not reached, want it through transparent egress: %q %q", r.stdout, r.stderr)
		}
	})
	t.Run("audit", func(t *testing.T) {
		b, _ := os.ReadFile(audit)
		s := string(b)
		for _, want := range []string{`"event":"run_start"`, `"decision":"allow"`, `"decision":"refuse"`, `"reason":"loopback"`, `"event":"egress_end"`, `"bytes_in":`, `"run_id":"`} {
			if !strings.Contains(s, want) {
				t.Errorf("audit lacks %s", want)
			}
		}
	})
}

func TestNoNetworkWithoutAllowList(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	c := newCanary(t, "tcp4", "127.0.0.1:0")
	// Host Unix sockets: a path one in host /tmp and an abstract one.
	sock := filepath.Join(sandboxtest.WorkDir(t), "host.sock")
	sandboxtest.ServeUnix(t, sock, func(net.Conn) {})
	os.Chmod(sock, 0o777)
	abstract := sandboxtest.ServeUnix(t, fmt.Sprintf("@sbx-canary-%d", os.Getpid()), func(net.Conn) {})
	probe := fmt.Sprintf(`
curl -s -m 5 http://127.0.0.1:%d/ >/dev/null && echo REACHED-TCP
python3 - <<'PY'
import socket
for name, addr in (("path", %q), ("abstract", "\0" + %q)):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(addr); print("REACHED-" + name)
    except OSError:
        pass
PY
true`, c.port(), sock, abstract[1:])
	// Positive control: unconfined, all three are reachable.
	ctl := unconfined(t, sandboxtest.WorkDir(t), probe)
	for _, want := range []string{"REACHED-TCP", "REACHED-path", "REACHED-abstract"} {
		if !strings.Contains(ctl.stdout, want) {
			t.Fatalf("control: %s not reached unconfined (untested): %q %q", want, ctl.stdout, ctl.stderr)
		}
	}
	r := sandboxed(t, w, probe)
	if strings.Contains(r.stdout, "REACHED") {
		t.Errorf("the sandbox reached a host endpoint: %q", r.stdout)
	}
	// GOPROXY=off is the offline setting of a run without egress, not a
	// proxy.
	r = sandboxed(t, w, `env | grep -i proxy | grep -vxc GOPROXY=off; ls /run/sandbox-run 2>&1 | head -1`)
	if !strings.HasPrefix(r.stdout, "0\n") {
		t.Errorf("no --allow-host, yet proxy variables or sockets are set up: %q", r.stdout)
	}
}

func TestEgressSocketMissing(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	r := run(t, "", "run", "--workdir", w, "--egress-socket", "/nonexistent/egress.sock", "--", "true")
	oneLine(t, r, "--egress-socket", "/nonexistent/egress.sock", "fix:")
	// A socket file that nobody serves refuses: also 125.
	dir := sandboxtest.WorkDir(t)
	sock := filepath.Join(dir, "dead.sock")
	l, _ := net.Listen("unix", sock)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	chownSocket(t, sock)
	r = run(t, "", "run", "--workdir", w, "--egress-socket", sock, "--", "true")
	oneLine(t, r, "refuses connections", "fix:")
}

func TestNodeProxyAndReload(t *testing.T) {
	needBwrap(t)
	nodeProxyAndReload(t)
}

// TestNodeProxyGvisor: --egress-socket under tier 2, with the reload.
func TestNodeProxyGvisor(t *testing.T) {
	sandboxtest.Runsc(t)
	nodeProxyAndReload(t, "--sandbox", "gvisor")
}

func nodeProxyAndReload(t *testing.T, mode ...string) {
	sandboxtest.Root(t)
	h := sandboxtest.NewTestHost(t, 2)
	dir := sandboxtest.WorkDir(t)
	sock := filepath.Join(dir, "egress.sock")
	cfg := filepath.Join(dir, "proxy.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"allow_hosts":[%q]}`, h.HostPort())), 0o644)
	px := exec.Command(bin, "proxy", "--listen", sock, "--config", cfg)
	var pxErr lockedBuffer
	px.Stderr = io.MultiWriter(os.Stderr, &pxErr)
	if err := px.Start(); err != nil {
		t.Fatal(err)
	}
	defer px.Process.Kill()
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	chownSocket(t, sock)
	w := sandboxtest.WorkDir(t)
	get := fmt.Sprintf(`curl -s -m 10 --noproxy '' -o /dev/null -w '%%{http_code}' http://%s/ok`, h.HostPort())
	via := append([]string{"--egress-socket", sock}, mode...)
	if r := sandboxed(t, w, get, via...); r.stdout != "200" {
		t.Fatalf("through the node proxy: %q %q", r.stdout, r.stderr)
	}
	// Reload with an empty allow-list: the same request is refused.
	os.WriteFile(cfg, []byte(`{"allow_hosts":[]}`), 0o644)
	px.Process.Signal(syscall.SIGHUP)
	waitFor(t, &pxErr, "allow-list reloaded")
	if r := sandboxed(t, w, get, via...); r.stdout != "403" {
		t.Errorf("after SIGHUP reload: %q, want 403", r.stdout)
	}
	px.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- px.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("proxy exit: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("proxy did not stop on SIGTERM")
	}
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("proxy left its socket behind")
	}
}

func TestLLMChannel(t *testing.T) {
	needBwrap(t)
	llmChannel(t)
}

// TestLLMChannelGvisor: the LLM channel under tier 2.
func TestLLMChannelGvisor(t *testing.T) {
	sandboxtest.Runsc(t)
	llmChannel(t, "--sandbox", "gvisor")
}

func llmChannel(t *testing.T, mode ...string) {
	dir := sandboxtest.WorkDir(t)
	sock := filepath.Join(dir, "llm.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	chownSocket(t, sock)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "llm-ok %s", r.URL.Path)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	w := sandboxtest.WorkDir(t)
	r := sandboxed(t, w, `curl -sS -m 10 "$SANDBOX_LLM_URL/v1/messages"; echo; echo "$ANTHROPIC_BASE_URL"`,
		append([]string{"--llm-socket", sock, "--llm-env", "ANTHROPIC_BASE_URL"}, mode...)...)
	if !strings.Contains(r.stdout, "llm-ok /v1/messages") || !strings.Contains(r.stdout, "http://127.0.0.1:") {
		t.Errorf("LLM channel: %q %q", r.stdout, r.stderr)
	}
}
