package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

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
	h := sandboxtest.NewTestHost(t, 2)
	w := sandboxtest.WorkDir(t)
	odd := sandboxtest.OddPort
	hp := fmt.Sprintf("%s:%d", h.Addr, odd)

	t.Run("control: unconfined reaches the service", func(t *testing.T) {
		r := unconfined(t, w, rawTCP(h.Addr.String(), odd))
		if !strings.Contains(r.stdout, sandboxtest.OddGreeting) {
			t.Fatalf("the odd-port service is unreachable unconfined (untested): %q %q", r.stdout, r.stderr)
		}
	})
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
