package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/hostnet"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// brokerScript connects to the test host with no proxy variables, reads
// an answer, and then tries what a hostile command would do with a
// socket of the host's: disconnect it (connect with AF_UNSPEC) and
// connect it again to another address. It prints the local address the
// socket shows, then each result.
const brokerScript = `import ctypes, socket, sys
host, port, other = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket()
s.connect((host, port))
s.sendall(b"GET /ok HTTP/1.0\r\n\r\n")
print("answer", s.recv(12).decode())
print("local", s.getsockname()[0])
libc = ctypes.CDLL(None, use_errno=True)
unspec = (ctypes.c_char * 16)()
rc = libc.connect(s.fileno(), unspec, 16)
print("unspec", rc, ctypes.get_errno())
ip = bytes(int(x) for x in other.split("."))
sin = (ctypes.c_char * 16)(*([2, 0, port >> 8, port & 255] + list(ip) + [0] * 8))
rc = libc.connect(s.fileno(), sin, 16)
print("reconnect", rc, ctypes.get_errno())
`

// TestTransparentBrokered: with transparent egress the connect broker
// gives an allowed connection a socket connected from the host (the
// report says "brokered", the audit "handed-off"), and that socket can
// be neither disconnected nor pointed elsewhere (EPERM), while the
// test host never sees a second connection. Control: with the broker
// off (hostnet.BrokerEnv=0) the same script's socket is the sandbox's
// own, relayed by the netstack: it shows the sandbox's address and can
// be disconnected (harmless there: its namespace has nowhere else to
// go). The host's source address a brokered socket shows is the leak
// the report's field documents.
func TestTransparentBrokered(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		sandboxtest.Unavailable(t, "python3", "apt-get install python3")
	}
	h := sandboxtest.NewTestHost(t, 2)
	w := sandboxtest.WorkDir(t)
	os.WriteFile(filepath.Join(w, "b.py"), []byte(brokerScript), 0o644)
	run := func(env ...string) (map[string]string, map[string]any, []map[string]any) {
		t.Helper()
		before := h.Count(t)
		rep, audit := filepath.Join(sandboxtest.WorkDir(t), "r.json"), filepath.Join(sandboxtest.WorkDir(t), "a.jsonl")
		r := runBin(t, bin, env, "", "run", "--workdir", w, "--allow-host", h.HostPort(), "--report", rep, "--audit", audit, "--",
			"python3", filepath.Join(w, "b.py"), h.Addr.String(), fmt.Sprint(h.Port), "127.0.0.1")
		if r.code != 0 {
			t.Fatalf("run %v: %d %s %s", env, r.code, r.stdout, r.stderr)
		}
		if n := h.Count(t) - before - 1; n != 1 { // the count request itself is counted
			t.Errorf("run %v: the test host saw %d connections, want 1", env, n)
		}
		out := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			k, v, _ := strings.Cut(l, " ")
			out[k] = v
		}
		var v map[string]any
		b, _ := os.ReadFile(rep)
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("report: %v", err)
		}
		tr, _ := v["egress_transparent"].(map[string]any)
		return out, tr, readAudit(t, audit)
	}
	out, tr, audit := run()
	t.Logf("brokered: %v", out)
	if out["answer"] != "HTTP/1.0 200" || out["unspec"] != "-1 1" || out["reconnect"] != "-1 1" {
		t.Errorf("brokered: %v; want the answer, then EPERM (1) for both", out)
	}
	if out["local"] == hostnet.TunAddr.Addr().String() {
		t.Errorf("brokered: the socket shows the sandbox's own address %s: not brokered", out["local"])
	}
	if tr["brokered"] != true {
		t.Errorf("brokered: the report says %v", tr)
	}
	if findAudit(audit, map[string]string{"event": "egress_end", "reason": "handed-off"}) == nil {
		t.Errorf("brokered: no handed-off line in the audit")
	}
	out, tr, _ = run(hostnet.BrokerEnv + "=0")
	t.Logf("broker off: %v", out)
	if out["answer"] != "HTTP/1.0 200" || out["unspec"] != "0 0" || out["local"] != hostnet.TunAddr.Addr().String() {
		t.Errorf("control, broker off: %v; want the answer, the sandbox's address and a disconnect", out)
	}
	if tr["brokered"] == true || !strings.Contains(fmt.Sprint(tr["broker_reason"]), hostnet.BrokerEnv) {
		t.Errorf("control, broker off: the report says %v", tr)
	}
}
