package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// gvKernel prints the first line of the kernel's log, which under gVisor
// names gVisor: the proof that the run was gVisor's and not bwrap's.
const gvKernel = "dmesg 2>/dev/null | head -1; "

// gvisored runs script under --sandbox gvisor as sandboxed does.
func gvisored(t *testing.T, w, script string, extra ...string) result {
	t.Helper()
	return sandboxed(t, w, gvKernel+script, append([]string{"--sandbox", "gvisor"}, extra...)...)
}

// wantGvisor fails the test unless r's output shows gVisor's kernel.
func wantGvisor(t *testing.T, r result) {
	t.Helper()
	if !strings.Contains(r.stdout, "gVisor") {
		t.Fatalf("the run was not served by gVisor's kernel: %q %q", r.stdout, r.stderr)
	}
}

// TestGvisorTransparentTCP: under gVisor, any TCP client with no proxy
// variables reaches an allowed host:port through init's TUN device and
// the host's netstack; the same port without its entry is refused, and
// the service never sees the connection; unconfined it is reached.
func TestGvisorTransparentTCP(t *testing.T) {
	sandboxtest.Runsc(t)
	sandboxtest.Root(t)
	h, w, hp := oddPortHost(t)
	odd := sandboxtest.OddPort
	t.Run("allowed by address", func(t *testing.T) {
		audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
		r := gvisored(t, w, rawTCP(h.Addr.String(), odd), "--allow-host", hp, "--audit", audit)
		wantGvisor(t, r)
		if !strings.Contains(r.stdout, sandboxtest.OddGreeting) {
			t.Fatalf("an allowed host:port was not reached without proxy variables: %q %q", r.stdout, r.stderr)
		}
		if findAudit(readAudit(t, audit), map[string]string{"event": "egress", "method": "TCP", "host": h.Addr.String(),
			"port": fmt.Sprint(odd), "decision": "allow"}) == nil {
			t.Errorf("no allow line for the TCP connection in the audit")
		}
	})
	t.Run("allowed by address, rootless", func(t *testing.T) {
		// sandbox-run as uid 65534 (the workdir's owner): runsc
		// --rootless, init's device made the same way, no root anywhere.
		out, code := gvRootless(t, w, gvKernel+rawTCP(h.Addr.String(), odd), "--allow-host", hp)
		if code != 0 || !strings.Contains(out, "gVisor") || !strings.Contains(out, sandboxtest.OddGreeting) {
			t.Fatalf("unprivileged: an allowed host:port was not reached without proxy variables: exit %d: %s", code, out)
		}
	})
	t.Run("refused without the entry", func(t *testing.T) {
		before, _ := h.OddCounts(t)
		audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
		r := gvisored(t, w, rawTCP(h.Addr.String(), odd), "--allow-host", h.HostPort(), "--audit", audit)
		wantGvisor(t, r)
		if !strings.Contains(r.stdout, "CONNECT-FAILED") || strings.Contains(r.stdout, sandboxtest.OddGreeting) {
			t.Fatalf("a port not on the allow list was reached: %q", r.stdout)
		}
		if after, _ := h.OddCounts(t); after != before {
			t.Errorf("the service accepted %d connections", after-before)
		}
		if findAudit(readAudit(t, audit), map[string]string{"event": "egress", "method": "TCP", "port": fmt.Sprint(odd), "decision": "refuse"}) == nil {
			t.Errorf("no refusal in the audit")
		}
	})
}

// TestGvisorTransparentUDP: under gVisor a datagram from inside never
// reaches a UDP listener, even on an allowed host:port; unconfined it
// does.
func TestGvisorTransparentUDP(t *testing.T) {
	sandboxtest.Runsc(t)
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
	hp := fmt.Sprintf("%s:%d", h.Addr, sandboxtest.OddPort)
	// The same run also reaches the host by TCP: the device was up.
	r := gvisored(t, w, send+"; "+rawTCP(h.Addr.String(), sandboxtest.OddPort), "--allow-host", hp)
	wantGvisor(t, r)
	if !strings.Contains(r.stdout, sandboxtest.OddGreeting) {
		t.Fatalf("TCP to the allowed host:port failed in the same run (untested): %q %q", r.stdout, r.stderr)
	}
	time.Sleep(200 * time.Millisecond)
	if _, after := h.OddCounts(t); after != ctl {
		t.Errorf("the UDP listener received %d datagrams from inside", after-ctl)
	}
}

// TestGvisorTransparentResolver: under gVisor the sandbox's resolver
// answers an allowed name (and a connection by it is audited under the
// name) and answers an unlisted one NXDOMAIN; unconfined, both resolve.
func TestGvisorTransparentResolver(t *testing.T) {
	sandboxtest.Runsc(t)
	sandboxtest.Root(t)
	h := sandboxtest.NewTestHost(t, 2)
	w := sandboxtest.WorkDir(t)
	hosts := fmt.Sprintf("%s svc.sbx.test\n%s unlisted.sbx.test\n127.0.0.1 rebind.sbx.test\n", h.Addr, h.Addr)
	script := gvKernel + `for n in svc.sbx.test unlisted.sbx.test rebind.sbx.test; do getent hosts $n >/dev/null && echo $n OK || echo $n FAIL; done; ` +
		rawTCP("svc.sbx.test", sandboxtest.OddPort)
	ctl := withHosts(t, hosts, "run", "--workdir", w, "--sandbox", "off", "--", "sh", "-c", script)
	for _, n := range []string{"svc", "unlisted", "rebind"} {
		if !strings.Contains(ctl.stdout, n+".sbx.test OK") {
			t.Fatalf("control: %s.sbx.test does not resolve unconfined (untested): %q %q", n, ctl.stdout, ctl.stderr)
		}
	}
	audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
	r := withHosts(t, hosts, "run", "--workdir", w, "--sandbox", "gvisor", "--audit", audit,
		"--allow-host", fmt.Sprintf("svc.sbx.test:%d", sandboxtest.OddPort), "--allow-host", "rebind.sbx.test",
		// A name in the test hosts' private range needs its address named too.
		"--allow-host", h.Addr.String()+"/32", "--", "sh", "-c", script)
	wantGvisor(t, r)
	for _, want := range []string{"svc.sbx.test OK", "unlisted.sbx.test FAIL", "rebind.sbx.test FAIL", sandboxtest.OddGreeting} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %q: %q %q", want, r.stdout, r.stderr)
		}
	}
	lines := readAudit(t, audit)
	for _, c := range []map[string]string{
		{"event": "egress", "method": "TCP", "host": "svc.sbx.test", "ip": h.Addr.String(), "decision": "allow"},
		{"event": "dns", "host": "unlisted.sbx.test", "decision": "refuse", "reason": "not-allowed"},
		{"event": "dns", "host": "rebind.sbx.test", "decision": "refuse", "reason": "loopback"},
	} {
		if findAudit(lines, c) == nil {
			t.Errorf("audit lacks %v", c)
		}
	}
}

// makeTun is a script that tries to make a TUN device, as init does, and
// prints TUN-MADE or TUN-REFUSED.
const makeTun = `python3 -c 'import fcntl,os,struct; fd=os.open("/dev/net/tun", os.O_RDWR); fcntl.ioctl(fd, 0x400454ca, struct.pack("16sH", b"tun9", 0x1001))' 2>/dev/null && echo TUN-MADE || echo TUN-REFUSED`

// TestGvisorTransparentCapabilities: the capability init makes the
// device with never reaches the command: under gVisor the command's
// capability sets are empty and it cannot make a TUN device, while the
// same attempt in a network namespace of root's own succeeds (control);
// the relay's socket takes no second connection; and the report says
// transparent egress is on, with capabilities:none verified.
func TestGvisorTransparentCapabilities(t *testing.T) {
	sandboxtest.Runsc(t)
	sandboxtest.Root(t)
	if _, err := exec.LookPath("python3"); err != nil {
		sandboxtest.Unavailable(t, "python3", "apt-get install python3")
	}
	w := sandboxtest.WorkDir(t)
	ctl := unconfined(t, w, "unshare -n sh -c '"+strings.ReplaceAll(makeTun, "'", `'"'"'`)+"'")
	if !strings.Contains(ctl.stdout, "TUN-MADE") {
		t.Fatalf("control: root in a network namespace of its own cannot make a TUN device (untested): %q %q", ctl.stdout, ctl.stderr)
	}
	rep := filepath.Join(sandboxtest.WorkDir(t), "report.json")
	relay := `python3 -c 'import socket; s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect("/run/sandbox-run/tun.sock")' 2>/dev/null && echo RELAY-CONNECTED || echo RELAY-REFUSED`
	r := gvisored(t, w, "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status; "+makeTun+"; "+relay, "--allow-host", "example.com", "--report", rep)
	wantGvisor(t, r)
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "Cap") && strings.Trim(strings.Fields(l)[1], "0") != "" {
			t.Errorf("the command holds a capability: %q", l)
		}
	}
	if !strings.Contains(r.stdout, "CapEff") || !strings.Contains(r.stdout, "TUN-REFUSED") || !strings.Contains(r.stdout, "RELAY-REFUSED") {
		t.Errorf("want empty capability sets, the device refused and the relay refused: %q %q", r.stdout, r.stderr)
	}
	var v struct {
		Transparent *struct {
			On     bool   `json:"transparent"`
			Reason string `json:"reason"`
		} `json:"egress_transparent"`
		Protections []struct {
			Name     string
			Verified *bool
		} `json:"protections"`
	}
	b, _ := os.ReadFile(rep)
	if err := json.Unmarshal(b, &v); err != nil || v.Transparent == nil || !v.Transparent.On {
		t.Fatalf("report: egress_transparent not on: %v %s", err, b)
	}
	caps := false
	for _, p := range v.Protections {
		caps = caps || p.Name == "capabilities:none" && p.Verified != nil && *p.Verified
	}
	if !caps {
		t.Errorf("report: capabilities:none not verified: %+v", v.Protections)
	}
	// Without an allow-list there is no device, and the report says why.
	b2 := filepath.Join(sandboxtest.WorkDir(t), "report.json")
	if r := gvisored(t, w, "true", "--report", b2); r.code != 0 {
		t.Fatalf("run without an allow-list: %d %q", r.code, r.stderr)
	}
	b, _ = os.ReadFile(b2)
	if strings.Contains(string(b), `"egress_transparent"`) {
		t.Errorf("a run with no network reports transparent egress: %s", b)
	}
}

// gvRootless runs `sandbox-run run --sandbox gvisor` as uid 65534, the
// owner of the workdirs root's tests make, and returns its combined
// output and exit status.
func gvRootless(t *testing.T, w, script string, extra ...string) (string, int) {
	t.Helper()
	home := sandboxtest.WorkDir(t)
	args := append(append([]string{"run", "--workdir", w, "--sandbox", "gvisor"}, extra...), "--", "sh", "-c", script)
	c := exec.Command(bin, args...)
	c.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin"}
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := c.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return string(out), c.ProcessState.ExitCode()
}
