package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/hostnet"
	"github.com/sandbox-run/sandbox-run/internal/netstack"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// hogConns is how many connections the hostile command opens: well over
// the lowered limit (limitedConns), under the default one.
const (
	hogConns     = 100
	limitedConns = 16
)

// TestTransparentConnLimit: a command opens hogConns connections through
// transparent egress to an allowed host, each asking for a 4 MiB
// download it never reads, so that every buffer on the way fills. Under
// a limit of limitedConns (SANDBOX_RUN_NETSTACK_MAX_CONNS, which only
// lowers the default) it gets exactly that many, the rest are reset and
// named in the audit and the refusals, and the host side's memory (the
// RSS of sandbox-run, from /proc) grows by less than the documented
// bound. Control: the same command under the default limit gets every
// connection, and the memory grows past the lowered limit's bound. These
// runs keep every connection on the netstack's path (no connect broker:
// hostnet.BrokerEnv=0), whose relays are what the limit bounds. With the
// broker the same command under the same limit gets every connection,
// and the host side grows by less than the bound: a brokered connection's
// buffers are the kernel's, charged to the sandbox, not sandbox-run's.
func TestTransparentConnLimit(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t)
	h := sandboxtest.NewTestHost(t, 2)
	bound := netstack.Limits{MaxConns: limitedConns}.MemoryBound()

	ctl := hog(t, h, 0, hostnet.BrokerEnv+"=0")
	if ctl.ok != hogConns {
		t.Fatalf("control: under the default limit %d of %d connections were made (untested): %s", ctl.ok, hogConns, ctl.stderr)
	}
	if ctl.growth <= bound {
		t.Fatalf("control: %d connections grew the host side by %d MiB, not past the bound of %d (%d MiB): untested",
			hogConns, ctl.growth>>20, limitedConns, bound>>20)
	}
	t.Logf("control: %d connections, host side grew by %d MiB", ctl.ok, ctl.growth>>20)

	r := hog(t, h, limitedConns, hostnet.BrokerEnv+"=0")
	t.Logf("limited: %d connections, %d refused, host side grew by %d MiB (bound %d MiB)", r.ok, r.fail, r.growth>>20, bound>>20)
	if r.ok != limitedConns || r.fail != hogConns-limitedConns {
		t.Errorf("under a limit of %d: %d connections made, %d refused; want %d and %d", limitedConns, r.ok, r.fail,
			limitedConns, hogConns-limitedConns)
	}
	if r.growth > bound {
		t.Errorf("the host side grew by %d MiB, over the bound of %d MiB", r.growth>>20, bound>>20)
	}
	if l := findAudit(readAudit(t, r.audit), map[string]string{"event": "egress", "method": "TCP", "host": h.Addr.String(),
		"decision": "refuse", "reason": "connection-limit"}); l == nil {
		t.Errorf("no connection-limit refusal in the audit")
	}
	if !strings.Contains(r.stderr, "connection-limit") {
		t.Errorf("stderr does not name the refusal: %s", r.stderr)
	}
	b := hog(t, h, limitedConns)
	t.Logf("brokered, under the same limit: %d connections, %d refused, host side grew by %d MiB", b.ok, b.fail, b.growth>>20)
	if b.ok != hogConns || b.growth > bound {
		t.Errorf("brokered: %d of %d connections made, host side grew by %d MiB (bound %d MiB); want all, under the bound",
			b.ok, hogConns, b.growth>>20, bound>>20)
	}
	if l := findAudit(readAudit(t, b.audit), map[string]string{"event": "egress_end", "host": h.Addr.String(), "reason": "handed-off"}); l == nil {
		t.Errorf("brokered: no handed-off connection in the audit")
	}
}

// hogRun is what one hostile run did: connections made and refused, the
// growth of sandbox-run's RSS while they were open, its audit and stderr.
type hogRun struct {
	ok, fail int
	growth   int64
	audit    string
	stderr   string
}

// hog runs the hostile command under a connection limit (0: the
// default), with env added to sandbox-run's, measuring sandbox-run's RSS
// before the connections and, at its highest, while they are open.
func hog(t *testing.T, h sandboxtest.TestHost, limit int, env ...string) hogRun {
	t.Helper()
	w := sandboxtest.WorkDir(t)
	run := hogRun{audit: filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")}
	script := filepath.Join(w, "hog.sh")
	os.WriteFile(script, []byte(hogScript(w, h.Addr.String(), h.Port)), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, bin, "run", "--workdir", w, "--allow-host", h.HostPort(), "--audit", run.audit, "--", "bash", script)
	c.Env = append(os.Environ(), env...)
	if limit > 0 {
		c.Env = append(c.Env, "SANDBOX_RUN_NETSTACK_MAX_CONNS="+strconv.Itoa(limit))
	}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	c.WaitDelay = 5 * time.Second
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	end := func() {
		once.Do(func() {
			os.WriteFile(filepath.Join(w, "done"), nil, 0o644)
			c.Wait()
			run.stderr = stderr.String()
		})
	}
	defer end()
	if !waitFile(filepath.Join(w, "ready0"), 30*time.Second) {
		t.Fatalf("the command did not start: %s", stderr.String())
	}
	before := rss(t, c.Process.Pid)
	os.WriteFile(filepath.Join(w, "go"), nil, 0o644)
	if !waitFile(filepath.Join(w, "ready"), 60*time.Second) {
		t.Fatalf("the command did not open its connections: %s", stderr.String())
	}
	b, _ := os.ReadFile(filepath.Join(w, "ready"))
	fmt.Sscan(string(b), &run.ok, &run.fail)
	// The buffers fill within moments; sample the RSS for a while and
	// keep the highest.
	peak := before
	for i := 0; i < 15; i++ {
		time.Sleep(200 * time.Millisecond)
		peak = max(peak, rss(t, c.Process.Pid))
	}
	run.growth = peak - before
	end()
	return run
}

// hogScript opens hogConns connections to addr:port one after another,
// asks each for 4 MiB and reads nothing; it writes "OK FAILED" to ready
// and waits for done (each wait bounded).
func hogScript(w, addr string, port int) string {
	return fmt.Sprintf(`unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
cd %q
touch ready0
for i in $(seq 300); do [ -e go ] && break; sleep 0.1; done
ok=0; fail=0
for i in $(seq %d); do
	if exec {fd}<>/dev/tcp/%s/%d 2>/dev/null; then
		printf 'GET /bytes?n=4194304 HTTP/1.0\r\n\r\n' >&$fd
		ok=$((ok+1))
	else
		fail=$((fail+1))
	fi
done
echo "$ok $fail" > ready
for i in $(seq 600); do [ -e done ] && break; sleep 0.1; done
`, w, hogConns, addr, port)
}

// waitFile polls for path for at most d.
func waitFile(path string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}

// rss is process pid's resident set size in bytes (VmRSS).
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}

// halfCloseConns and halfCloseLimit: the half-closing command's
// connections, and the lowered limit it runs under.
const (
	halfCloseConns = 24
	halfCloseLimit = 8
)

// TestTransparentHalfCloseHoldsSlot: a command that asks for 512 KiB,
// half-closes (shutdown SHUT_WR) and never reads leaves, on the host
// side, a closed connection whose data the sandbox has not acknowledged.
// Such a connection keeps its slot until the data is acknowledged (or
// for at most ten seconds), so under a limit of halfCloseLimit the
// command gets that many connections however long it waits between
// them; the rest are reset. Control: under the default limit every
// connection is made. Both keep every connection on the netstack's path
// (hostnet.BrokerEnv=0): a brokered one holds no slot.
func TestTransparentHalfCloseHoldsSlot(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t)
	if _, err := exec.LookPath("python3"); err != nil {
		sandboxtest.Unavailable(t, "python3", "apt-get install python3")
	}
	h := sandboxtest.NewTestHost(t, 2)
	ctl := halfClose(t, h, 0)
	if ctl.ok != halfCloseConns {
		t.Fatalf("control: under the default limit %d of %d connections were made (untested): %s", ctl.ok, halfCloseConns, ctl.stderr)
	}
	r := halfClose(t, h, halfCloseLimit)
	if r.ok != halfCloseLimit || r.fail != halfCloseConns-halfCloseLimit {
		t.Errorf("under a limit of %d: %d made, %d refused; want %d and %d (a half-closed connection with data in flight gave its slot back)",
			halfCloseLimit, r.ok, r.fail, halfCloseLimit, halfCloseConns-halfCloseLimit)
	}
}

// halfClose runs the half-closing command under a connection limit (0:
// the default).
func halfClose(t *testing.T, h sandboxtest.TestHost, limit int) hogRun {
	t.Helper()
	w := sandboxtest.WorkDir(t)
	script := fmt.Sprintf(`import os, socket, time
ok = fail = 0
keep = []
for i in range(%d):
    s = socket.socket()
    try:
        s.connect((%q, %d))
        s.sendall(b"GET /bytes?n=524288 HTTP/1.0\r\n\r\n")
        s.shutdown(socket.SHUT_WR)
        keep.append(s)
        ok += 1
    except OSError:
        fail += 1
    time.sleep(0.15)
print(ok, fail)
`, halfCloseConns, h.Addr.String(), h.Port)
	env := []string{hostnet.BrokerEnv + "=0"}
	if limit > 0 {
		env = append(env, "SANDBOX_RUN_NETSTACK_MAX_CONNS="+strconv.Itoa(limit))
	}
	os.WriteFile(filepath.Join(w, "half.py"), []byte(script), 0o644)
	res := runBin(t, bin, env, "", "run", "--workdir", w, "--allow-host", h.HostPort(), "--", "python3", filepath.Join(w, "half.py"))
	run := hogRun{stderr: res.stderr}
	if _, err := fmt.Sscan(res.stdout, &run.ok, &run.fail); err != nil {
		t.Fatalf("the command's output %q: %v; stderr: %s", res.stdout, err, res.stderr)
	}
	return run
}
