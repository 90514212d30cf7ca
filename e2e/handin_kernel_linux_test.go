package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// unixServer serves "FROM-name" to every connection on dir/name.
func unixServer(t *testing.T, dir, name string) string {
	t.Helper()
	p := sandboxtest.ServeUnix(t, filepath.Join(dir, name), func(c net.Conn) { io.WriteString(c, "FROM-"+name+"\n") })
	os.Chmod(p, 0o777) // the sandbox's uid connects
	return p
}

// socketProbe connects to each path and prints what it read.
func socketProbe(paths ...string) string {
	var b strings.Builder
	b.WriteString("python3 - <<'PY'\nimport socket\n")
	for _, p := range paths {
		fmt.Fprintf(&b, "try:\n    s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(%q); print(s.recv(100).decode().strip())\nexcept OSError as e:\n    print('FAILED', %q, e)\n", p, p)
	}
	b.WriteString("PY\n")
	return b.String()
}

// auditEvents reads the audit file's lines of event ev.
func auditEvents(t *testing.T, path, ev string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["event"] == ev {
			out = append(out, m)
		}
	}
	return out
}

// TestUnixSocketHandIn: --unix-socket hands in that socket and nothing
// else of its directory, audited per connection. Controls: unconfined
// both sockets are reached; sandboxed without the flag neither is.
func TestUnixSocketHandIn(t *testing.T) {
	needBwrap(t)
	dir := sandboxtest.WorkDir(t)
	a, b := unixServer(t, dir, "a.sock"), unixServer(t, dir, "b.sock")
	probe := socketProbe(a, b)
	ctl := unconfined(t, sandboxtest.WorkDir(t), probe)
	if !strings.Contains(ctl.stdout, "FROM-a.sock") || !strings.Contains(ctl.stdout, "FROM-b.sock") {
		t.Fatalf("control: the sockets are not reached unconfined (untested): %q %q", ctl.stdout, ctl.stderr)
	}
	for _, m := range handInMechanisms {
		t.Run(m.name, func(t *testing.T) {
			m.need(t)
			w := sandboxtest.WorkDir(t)
			if r := sandboxed(t, w, probe, "--sandbox", m.name); strings.Contains(r.stdout, "FROM-") {
				t.Fatalf("without --unix-socket the sandbox reached a socket: %q", r.stdout)
			}
			audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
			r := sandboxed(t, w, probe, "--sandbox", m.name, "--unix-socket", a, "--audit", audit)
			if !strings.Contains(r.stdout, "FROM-a.sock") {
				t.Errorf("--unix-socket %s: not reached: %q %q", a, r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout, "FROM-b.sock") {
				t.Errorf("--unix-socket %s: its sibling b.sock was reached too: %q", a, r.stdout)
			}
			ev := auditEvents(t, audit, "unix_socket")
			if len(ev) != 1 || ev[0]["path"] != a {
				t.Errorf("audit: unix_socket events %v, want one for %s", ev, a)
			}
		})
	}
}

// handInMechanisms are the mechanisms that hand in sockets, the
// ssh-agent and ports, each with its gate: bwrap and gVisor, whose
// networks hostnet sets up alike.
var handInMechanisms = []struct {
	name string
	need func(*testing.T)
}{
	{"bwrap", needBwrap},
	{"gvisor", func(t *testing.T) { sandboxtest.Runsc(t) }},
}

// TestRootSocketRefused: a socket that grants host root is refused with
// the flag that would hand it in, recognised by its name (docker.sock)
// and by the process listening (a root "dockerd" on any name). Control:
// with --unix-socket-unsafe the same socket is reached, and the report
// names it unsafe.
func TestRootSocketRefused(t *testing.T) {
	needBwrap(t)
	dir := sandboxtest.WorkDir(t)
	docker := unixServer(t, dir, "docker.sock")
	cases := []struct{ name, path, why string }{{"by name", docker, "docker.sock"}}
	if os.Geteuid() == 0 {
		cases = append(cases, struct{ name, path, why string }{"by peer", rootDaemon(t, dir), "dockerd"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := sandboxtest.WorkDir(t)
			r := sandboxed(t, w, socketProbe(c.path), "--unix-socket", c.path)
			oneLine(t, r, "--unix-socket-unsafe "+c.path, c.why, "host root")
			report := filepath.Join(sandboxtest.WorkDir(t), "report.json")
			r = sandboxed(t, w, socketProbe(c.path), "--unix-socket-unsafe", c.path, "--report", report)
			if !strings.Contains(r.stdout, "FROM-") {
				t.Fatalf("control: --unix-socket-unsafe %s not reached: %q %q", c.path, r.stdout, r.stderr)
			}
			var rep struct {
				HandIn struct {
					Sockets []struct {
						Path   string
						Unsafe bool
					}
				} `json:"hand_in"`
			}
			b, _ := os.ReadFile(report)
			if err := json.Unmarshal(b, &rep); err != nil || len(rep.HandIn.Sockets) != 1 || !rep.HandIn.Sockets[0].Unsafe {
				t.Errorf("report does not name %s unsafe: %s", c.path, b)
			}
		})
	}
}

// rootDaemon starts a Unix socket server whose process is named dockerd
// (a copy of python3) on dir/api.sock, a name no list holds.
func rootDaemon(t *testing.T, dir string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks("/usr/bin/python3") // the system's, whose library is under /usr
	if err != nil {
		sandboxtest.Unavailable(t, "/usr/bin/python3", "install python3")
	}
	exe := filepath.Join(dir, "dockerd")
	sandboxtest.CopyExecutable(t, real, exe)
	sock := filepath.Join(dir, "api.sock")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, exe, "-c", fmt.Sprintf(`
import socket, os
s = socket.socket(socket.AF_UNIX); s.bind(%q); os.chmod(%q, 0o777); s.listen(8); print("ready", flush=True)
while True:
    c, _ = s.accept()
    try:
        c.sendall(b"FROM-dockerd\n")
    except OSError:
        pass
    c.close()
`, sock, sock))
	cmd.Env = []string{"PYTHONHOME=/usr", "PATH=/usr/bin:/bin"}
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "ready\n" {
		t.Fatalf("the dockerd stand-in did not start: %q %v", line, err)
	}
	return sock
}

// TestHostPort: --host-port makes a host loopback service reachable inside
// at the same address, audited per connection. Controls: unconfined it is
// reached; sandboxed without the flag it is not.
func TestHostPort(t *testing.T) {
	needBwrap(t)
	c := newCanary(t, "tcp4", "127.0.0.1:0")
	probe := fmt.Sprintf("curl -sS -m 5 http://127.0.0.1:%d/", c.port())
	if r := unconfined(t, sandboxtest.WorkDir(t), probe); !strings.Contains(r.stdout, "CANARY-REACHED") {
		t.Fatalf("control: the service is not reached unconfined (untested): %q %q", r.stdout, r.stderr)
	}
	for _, m := range handInMechanisms {
		t.Run(m.name, func(t *testing.T) {
			m.need(t)
			w := sandboxtest.WorkDir(t)
			if r := sandboxed(t, w, probe, "--sandbox", m.name); strings.Contains(r.stdout, "CANARY-REACHED") {
				t.Fatalf("without --host-port the sandbox reached the host's loopback: %q", r.stdout)
			}
			audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
			before := c.count.Load()
			r := sandboxed(t, w, probe, "--sandbox", m.name, "--host-port", fmt.Sprint(c.port()), "--audit", audit)
			if !strings.Contains(r.stdout, "CANARY-REACHED") {
				t.Errorf("--host-port %d: not reached: %q %q", c.port(), r.stdout, r.stderr)
			}
			if n := c.count.Load() - before; n != 1 {
				t.Errorf("the service saw %d connections, want 1", n)
			}
			if ev := auditEvents(t, audit, "host_port"); len(ev) != 1 || ev[0]["addr"] != fmt.Sprintf("127.0.0.1:%d", c.port()) {
				t.Errorf("audit: host_port events %v, want one", ev)
			}
			// A port sandbox-run's own init serves inside is refused.
			oneLine(t, sandboxed(t, w, "true", "--sandbox", m.name, "--host-port", "3128"), "host-port", "3128", "egress proxy")
		})
	}
}

// TestPublish: --publish makes a server inside reachable on the host's
// loopback. Control: without the flag the host's connection is refused.
func TestPublish(t *testing.T) {
	for _, m := range handInMechanisms {
		t.Run(m.name, func(t *testing.T) {
			m.need(t)
			publish(t, m.name)
		})
	}
}

// publish is TestPublish under one mechanism.
func publish(t *testing.T, mode string) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	serve := `cd /tmp && echo PUBLISHED-OK > f.txt && exec timeout 8 python3 -m http.server -b 127.0.0.1 8000 >/dev/null 2>&1`
	fetch := func(publish bool) (string, error) {
		w := sandboxtest.WorkDir(t)
		args := []string{"run", "--workdir", w, "--sandbox", mode}
		if publish {
			args = append(args, "--publish", fmt.Sprintf("8000:%d", hostPort))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(args, "--", "sh", "-c", serve)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		cl := http.Client{Timeout: 3 * time.Second}
		var last error
		for range 30 { // the server inside needs a moment
			time.Sleep(200 * time.Millisecond)
			resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/f.txt", hostPort))
			if err != nil {
				last = err
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return string(b), nil
			}
			last = fmt.Errorf("status %s", resp.Status)
		}
		return "", last
	}
	if body, err := fetch(false); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("control: without --publish the host fetched %q (%v), want connection refused", body, err)
	}
	body, err := fetch(true)
	if err != nil || !strings.Contains(body, "PUBLISHED-OK") {
		t.Errorf("--publish 8000:%d: %q %v", hostPort, body, err)
	}
}

// TestRefusalNamesFlag: a refused connection is named once on stderr at
// the end of the run with the exact flag that allows it, and with
// --verbose as it happens too; the audit line carries the flag. Control:
// with that flag the same request reaches the host and nothing is named.
func TestRefusalNamesFlag(t *testing.T) {
	needBwrap(t)
	h := sandboxtest.NewTestHost(t, 0)
	fix := "--allow-host " + h.HostPort()
	probe := fmt.Sprintf("curl -sS -m 5 http://%s/ok; curl -sS -m 5 http://%s/ok; true", h.HostPort(), h.HostPort())
	w := sandboxtest.WorkDir(t)
	audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
	r := sandboxed(t, w, probe, "--allow-host", "example.org", "--audit", audit)
	if strings.Contains(r.stdout, "ok from test host") {
		t.Fatalf("the unlisted host was reached: %q", r.stdout)
	}
	if n := strings.Count(r.stderr, "to allow it: "+fix+"\n") + strings.Count(r.stderr, "to allow it: "+fix+" ["); n != 1 {
		t.Errorf("stderr names %q %d times, want once:\n%s", fix, n, r.stderr)
	}
	found := false
	for _, ev := range auditEvents(t, audit, "egress") {
		found = found || ev["decision"] == "refuse" && ev["fix"] == fix
	}
	if !found {
		t.Errorf("no refused egress line in the audit with fix %q", fix)
	}
	r = sandboxed(t, w, probe, "--allow-host", "example.org", "--verbose")
	if n := strings.Count(r.stderr, fix); n != 2 {
		t.Errorf("--verbose: stderr names %q %d times, want twice (as it happened, and at the end):\n%s", fix, n, r.stderr)
	}
	r = sandboxed(t, w, probe, "--allow-host", h.HostPort())
	if !strings.Contains(r.stdout, "ok from test host") || strings.Contains(r.stderr, "refused") {
		t.Errorf("control: with %s: stdout %q, stderr %q", fix, r.stdout, r.stderr)
	}
}
