package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// A client with no proxy support: bash's /dev/tcp, with every proxy
// variable unset. It prints what the service wrote, or CONNECT-FAILED.
func rawTCP(host string, port int) string {
	return fmt.Sprintf(`unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy; `+
		`timeout 5 bash -c 'exec 3<>/dev/tcp/%s/%d && cat <&3' 2>/dev/null || echo CONNECT-FAILED`, host, port)
}

// withHosts runs sandbox-run in a mount namespace of its own whose
// /etc/hosts is hosts: the host side's resolver (Go's, which reads
// /etc/hosts) then knows the test's names, and nothing outside the test
// sees them. Inside the sandbox /etc/hosts is the sandbox's own.
func withHosts(t *testing.T, hosts string, args ...string) result {
	t.Helper()
	return withHostsEnv(t, nil, hosts, args...)
}

// withHostsEnv is withHosts with env added to sandbox-run's environment.
func withHostsEnv(t *testing.T, env []string, hosts string, args ...string) result {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		sandboxtest.Unavailable(t, "unshare (util-linux)", "apt-get install util-linux")
	}
	f := filepath.Join(sandboxtest.WorkDir(t), "hosts")
	if err := os.WriteFile(f, []byte("127.0.0.1 localhost\n"+hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"-m", "sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`, f, bin}, args...)
	return runBin(t, "unshare", env, "", argv...)
}

func readAudit(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, _ := os.ReadFile(path)
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// findAudit returns the first audit line whose fields have every value
// of want (compared as text).
func findAudit(lines []map[string]any, want map[string]string) map[string]any {
next:
	for _, l := range lines {
		for k, v := range want {
			if fmt.Sprint(l[k]) != v {
				continue next
			}
		}
		return l
	}
	return nil
}

// TestTransparentTCP: any TCP client, with no proxy variables, reaches an
// allowed host:port through the netstack, by address and by a name the
// sandbox's resolver answered; without the entry, and for the host's
// loopback and own addresses, it does not; each with its control.
func TestTransparentTCP(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t)
	h, w, hp := oddPortHost(t)
	odd := sandboxtest.OddPort
	t.Run("allowed by address", func(t *testing.T) {
		audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
		r := sandboxed(t, w, rawTCP(h.Addr.String(), odd), "--allow-host", hp, "--audit", audit)
		if !strings.Contains(r.stdout, sandboxtest.OddGreeting) {
			t.Fatalf("an allowed host:port was not reached without proxy variables: %q %q", r.stdout, r.stderr)
		}
		if findAudit(readAudit(t, audit), map[string]string{"event": "egress", "method": "TCP", "host": h.Addr.String(),
			"port": fmt.Sprint(odd), "decision": "allow"}) == nil {
			t.Errorf("no allow line for the TCP connection in the audit")
		}
	})
	t.Run("refused without the entry", func(t *testing.T) {
		before, _ := h.OddCounts(t)
		audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
		r := sandboxed(t, w, rawTCP(h.Addr.String(), odd), "--allow-host", h.HostPort(), "--audit", audit)
		if !strings.Contains(r.stdout, "CONNECT-FAILED") || strings.Contains(r.stdout, sandboxtest.OddGreeting) {
			t.Fatalf("a port not on the allow list was reached: %q", r.stdout)
		}
		if after, _ := h.OddCounts(t); after != before {
			t.Errorf("the service accepted %d connections", after-before)
		}
		l := findAudit(readAudit(t, audit), map[string]string{"event": "egress", "method": "TCP", "port": fmt.Sprint(odd), "decision": "refuse"})
		if l == nil {
			t.Fatalf("no refusal in the audit")
		}
	})
	t.Run("host loopback and own address refused", func(t *testing.T) {
		hostLoopbackAndOwn(t, h, w)
	})
}

// hostLoopbackAndOwn: a canary on every address of the host is reached
// unconfined at 127.0.0.1 and at the host's own address, and from inside
// at neither, even with a CIDR entry that covers the own address; the
// metadata address is refused by the range table (audit).
func hostLoopbackAndOwn(t *testing.T, h sandboxtest.TestHost, w string) {
	c := newCanary(t, "tcp4", "0.0.0.0:0")
	port := c.port()
	script := rawTCP("127.0.0.1", port) + "; " + rawTCP(h.Local.String(), port) + "; " + rawTCP("169.254.169.254", 80)
	ctl := unconfined(t, w, script)
	if n := c.count.Load(); n < 2 {
		t.Fatalf("control: the canary saw %d connections unconfined, want 2 (untested): %q", n, ctl.stdout)
	}
	before := c.count.Load()
	audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
	r := sandboxed(t, w, script, "--allow-host", "198.18.0.0/15", "--audit", audit)
	if strings.Count(r.stdout, "CONNECT-FAILED") != 3 {
		t.Errorf("want every attempt refused: %q %q", r.stdout, r.stderr)
	}
	time.Sleep(50 * time.Millisecond)
	if n := c.count.Load(); n != before {
		t.Errorf("the host canary saw %d connections from inside", n-before)
	}
	lines := readAudit(t, audit)
	for _, reason := range []string{"own-address", "metadata"} {
		if findAudit(lines, map[string]string{"method": "TCP", "decision": "refuse", "reason": reason}) == nil {
			t.Errorf("no %s refusal in the audit", reason)
		}
	}
}

// TestTransparentUDP: a datagram from inside never reaches a UDP
// listener, even on an allowed host:port; unconfined it does.
func TestTransparentUDP(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t)
	h := sandboxtest.NewTestHost(t, 2)
	w := sandboxtest.WorkDir(t)
	send := fmt.Sprintf(`for i in 1 2 3; do bash -c 'echo ping > /dev/udp/%s/%d' 2>/dev/null; done; true`, h.Addr, sandboxtest.OddPort)
	_, before := h.OddCounts(t)
	unconfined(t, w, send)
	_, ctl := h.OddCounts(t)
	for i := 0; i < 50 && ctl == before; i++ {
		time.Sleep(20 * time.Millisecond)
		_, ctl = h.OddCounts(t)
	}
	if ctl == before {
		t.Fatal("control: the UDP listener received nothing unconfined (untested)")
	}
	sandboxed(t, w, send, "--allow-host", fmt.Sprintf("%s:%d", h.Addr, sandboxtest.OddPort))
	time.Sleep(200 * time.Millisecond)
	if _, after := h.OddCounts(t); after != ctl {
		t.Errorf("the UDP listener received %d datagrams from inside", after-ctl)
	}
}

// TestTransparentResolver: the sandbox's resolver answers an allowed name
// (and a connection by it is audited under the name), answers an unlisted
// name NXDOMAIN at once, and refuses names that resolve to loopback or an
// internal address; unconfined, every name resolves.
func TestTransparentResolver(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t)
	h := sandboxtest.NewTestHost(t, 2)
	w := sandboxtest.WorkDir(t)
	hosts := fmt.Sprintf("%s svc.sbx.test\n%s unlisted.sbx.test\n127.0.0.1 rebind.sbx.test\n10.9.8.7 internal.sbx.test\n", h.Addr, h.Addr)
	names := []string{"svc.sbx.test", "unlisted.sbx.test", "rebind.sbx.test", "internal.sbx.test"}
	var script strings.Builder
	for _, n := range names {
		fmt.Fprintf(&script, `s=$(date +%%s%%N); getent hosts %s >/dev/null && r=OK || r=FAIL; echo %s $r $(( ($(date +%%s%%N) - s) / 1000000 ))`+"\n", n, n)
	}
	script.WriteString(rawTCP("svc.sbx.test", sandboxtest.OddPort) + "\n")

	ctl := withHosts(t, hosts, "run", "--workdir", w, "--sandbox", "off", "--", "sh", "-c", script.String())
	for _, n := range names {
		if !strings.Contains(ctl.stdout, n+" OK") {
			t.Fatalf("control: %s does not resolve unconfined (untested): %q %q", n, ctl.stdout, ctl.stderr)
		}
	}
	audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
	allow := []string{"--allow-host", "svc.sbx.test:4567", "--allow-host", "rebind.sbx.test", "--allow-host", "internal.sbx.test",
		"--allow-host", h.Addr.String() + "/32"}
	r := withHosts(t, hosts, append(append([]string{"run", "--workdir", w, "--audit", audit}, allow...), "--", "sh", "-c", script.String())...)
	want := map[string]string{"svc.sbx.test": "OK", "unlisted.sbx.test": "FAIL", "rebind.sbx.test": "FAIL", "internal.sbx.test": "FAIL"}
	for _, l := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || want[f[0]] == "" {
			continue
		}
		if f[1] != want[f[0]] {
			t.Errorf("%s: %s, want %s", f[0], f[1], want[f[0]])
		}
		if ms := f[2]; f[0] == "unlisted.sbx.test" && len(ms) > 3 {
			t.Errorf("an unlisted name took %s ms to fail, want it at once", ms)
		}
		delete(want, f[0])
	}
	if len(want) > 0 {
		t.Fatalf("no result for %v: %q %q", want, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, sandboxtest.OddGreeting) {
		t.Errorf("a connection by an allowed name failed: %q", r.stdout)
	}
	lines := readAudit(t, audit)
	for _, c := range []map[string]string{
		{"event": "egress", "method": "TCP", "host": "svc.sbx.test", "ip": h.Addr.String(), "decision": "allow"},
		{"event": "dns", "host": "unlisted.sbx.test", "decision": "refuse", "reason": "not-allowed"},
		{"event": "dns", "host": "rebind.sbx.test", "decision": "refuse", "reason": "loopback"},
		{"event": "dns", "host": "internal.sbx.test", "decision": "refuse", "reason": "private"},
	} {
		if findAudit(lines, c) == nil {
			t.Errorf("audit lacks %v", c)
		}
	}
}

// TestTransparentReport: the report says transparent egress is on under
// bwrap where the caller may open /dev/net/tun (root or not) and off,
// with why, where it may not; and names it lost, with why, under Landlock.
func TestTransparentReport(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	type rep struct {
		Transparent *struct {
			On     bool   `json:"transparent"`
			Reason string `json:"reason"`
		} `json:"egress_transparent"`
		Losses []struct{ Name, Detail string } `json:"losses"`
	}
	read := func(extra ...string) rep {
		f := filepath.Join(sandboxtest.WorkDir(t), "report.json")
		r := sandboxed(t, w, "true", append([]string{"--allow-host", "example.com", "--report", f}, extra...)...)
		if r.code != 0 {
			t.Fatalf("run %v: %d %q", extra, r.code, r.stderr)
		}
		var v rep
		b, _ := os.ReadFile(f)
		if err := json.Unmarshal(b, &v); err != nil || v.Transparent == nil {
			t.Fatalf("report %v: %v %s", extra, err, b)
		}
		return v
	}
	// Root or not: on exactly when this caller may open /dev/net/tun.
	usable := unix.Faccessat(unix.AT_FDCWD, "/dev/net/tun", unix.R_OK|unix.W_OK, unix.AT_EACCESS) == nil
	if v := read(); v.Transparent.On != usable || (!usable && !strings.Contains(v.Transparent.Reason, "/dev/net/tun")) {
		t.Errorf("bwrap (/dev/net/tun usable: %v): %+v, want on exactly then, else off with the reason", usable, *v.Transparent)
	}
	sandboxtest.Landlock(t, 4)
	v := read("--sandbox", "landlock")
	if v.Transparent.On || !strings.Contains(v.Transparent.Reason, "no network namespace") {
		t.Errorf("landlock: %+v, want off with the reason", *v.Transparent)
	}
	named := false
	for _, l := range v.Losses {
		named = named || strings.Contains(l.Detail, "no transparent egress")
	}
	if !named {
		t.Errorf("landlock's losses do not name transparent egress: %+v", v.Losses)
	}
}

// oddPortHost starts a test host (index 2) whose odd-port service
// greets, and runs the control every transparent TCP test shares: from
// an unconfined process the service is reached. It returns the host, a
// workdir and the service's host:port.
func oddPortHost(t *testing.T) (sandboxtest.TestHost, string, string) {
	t.Helper()
	h := sandboxtest.NewTestHost(t, 2)
	w := sandboxtest.WorkDir(t)
	t.Run("control: unconfined reaches the service", func(t *testing.T) {
		r := unconfined(t, w, rawTCP(h.Addr.String(), sandboxtest.OddPort))
		if !strings.Contains(r.stdout, sandboxtest.OddGreeting) {
			t.Fatalf("the odd-port service is unreachable unconfined (untested): %q %q", r.stdout, r.stderr)
		}
	})
	return h, w, fmt.Sprintf("%s:%d", h.Addr, sandboxtest.OddPort)
}
