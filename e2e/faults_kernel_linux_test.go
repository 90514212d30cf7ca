package e2e

// Faults from outside a running sandbox: the node's egress proxy dying,
// bwrap or sandbox-run being killed, the workdir's disk filling up. Each
// test shows the sandbox working before the fault (the positive control)
// and then what the fault leaves: a clear error, the right exit status,
// no process of the sandbox, no other way out, no leftovers.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// faultPaths are the two launch paths a fault can hit: the fast path
// (bwrap's PID 1 and the sh trampoline) and sandbox-run's Go init, which a
// run with --allow-host needs for its forwarder and built-in proxy. No
// network traffic happens: the allowed name is never asked for.
var faultPaths = []struct {
	name  string
	flags []string
}{
	{"fast", nil},
	{"init (--allow-host)", []string{"--allow-host", "example.invalid"}},
}

// bgRun is a sandbox-run started in the background; its stdout is read
// line by line and its stderr collected.
type bgRun struct {
	cmd    *exec.Cmd
	lines  chan string // closed at EOF
	stderr lockedBuffer
	exited chan struct{}
	code   int // valid once exited is closed; -1: killed by a signal
	// workdir is the run's workdir, when the test made it (startSleeping).
	workdir string
}

// startRun starts sandbox-run with args. It is killed, if still running,
// when the test ends.
func startRun(t *testing.T, args ...string) *bgRun {
	t.Helper()
	r := &bgRun{cmd: exec.Command(bin, args...), lines: make(chan string, 64), exited: make(chan struct{})}
	// A pipe of our own rather than StdoutPipe: Wait would close that one
	// as soon as sandbox-run exits, maybe before its last lines are read.
	out, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stdout = pw
	r.cmd.Stderr = &r.stderr
	err = r.cmd.Start()
	pw.Close()
	if err != nil {
		out.Close()
		t.Fatal(err)
	}
	go func() {
		defer close(r.lines)
		defer out.Close()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	go func() {
		err := r.cmd.Wait()
		r.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		}
		close(r.exited)
	}()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("sandbox-run did not end within 10s of SIGKILL")
		}
	})
	return r
}

// line returns the next stdout line that starts with prefix, skipping
// others, or fails after d.
func (r *bgRun) line(t *testing.T, prefix string, d time.Duration) string {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("stdout ended before a line %q; stderr: %s", prefix, r.stderr.String())
			}
			if strings.HasPrefix(l, prefix) {
				t.Logf("command: %s", l)
				return strings.TrimPrefix(l, prefix)
			}
		case <-timeout:
			t.Fatalf("no line %q within %v; stderr: %s", prefix, d, r.stderr.String())
		}
	}
}

// wait returns sandbox-run's exit status, or fails after d.
func (r *bgRun) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-r.exited:
		return r.code
	case <-time.After(d):
		t.Fatalf("sandbox-run still running after %v; stderr: %s", d, r.stderr.String())
	}
	return 0
}

// procPIDs lists the pids under /proc.
func procPIDs() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// inPIDNamespace lists the live processes whose PID namespace is ns (as
// readlink /proc/PID/ns/pid spells it, "pid:[N]"): every process of one
// sandbox, wherever it forked or setsid'd to. Zombies are dead (a PID 1
// whose parent died with it waits for the host's init to reap it) and are
// not listed.
func inPIDNamespace(ns string) []int {
	var out []int
	for _, pid := range procPIDs() {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err == nil && l == ns && running(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// childrenOf lists the live children of pid, from /proc/*/status (this
// kernel has no /proc/PID/task/TID/children).
func childrenOf(pid int) []int {
	var out []int
	want := fmt.Sprintf("PPid:\t%d\n", pid)
	for _, p := range procPIDs() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err == nil && strings.Contains(string(b), want) && !strings.Contains(string(b), "State:\tZ") {
			out = append(out, p)
		}
	}
	return out
}

// running reports whether pid is a live (not zombie) process.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	return err == nil && !strings.Contains(string(b), "State:\tZ")
}

// bwrapOf returns the bwrap that sandbox-run process pid started.
func bwrapOf(t *testing.T, pid int) int {
	t.Helper()
	var found []int
	for _, c := range childrenOf(pid) {
		// The short-lived bwrap that joins the sandbox's user namespace
		// to set its inotify ceiling (--userns) is not the sandbox.
		argv, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); strings.TrimSpace(string(comm)) == "bwrap" && !bytes.Contains(argv, []byte("\x00--userns\x00")) {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one bwrap child of sandbox-run %d, found %v", pid, found)
	}
	return found[0]
}

// withArgv lists the live processes whose command line is exactly argv.
func withArgv(argv ...string) []int {
	want := strings.Join(argv, "\x00") + "\x00"
	var out []int
	for _, pid := range procPIDs() {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && string(b) == want {
			out = append(out, pid)
		}
	}
	return out
}

// sleepMarker is an argument of sleep that no other process on the host
// has: "600.<random digits>".
func sleepMarker() string { return fmt.Sprintf("600.%09d", rand.IntN(1e9)) }

// sandboxScript starts, in the sandbox, a setsid'd sleep, a double-forked
// one and a plain one, all with marker on their command line, prints the
// sandbox's PID namespace on a line "ns " and sleeps.
func sandboxScript(marker string) string {
	return fmt.Sprintf(`setsid sleep %[1]s </dev/null >/dev/null 2>&1 &
(sleep %[1]s </dev/null >/dev/null 2>&1 &)
sleep %[1]s &
echo "ns $(readlink /proc/self/ns/pid)"
wait`, marker)
}

// startSleeping starts sandboxScript under sandbox-run and returns the
// run, the sandbox's PID namespace and the sleeps' marker, once the host
// sees the sandbox's processes: the positive control for the checks that
// none is left.
func startSleeping(t *testing.T, flags []string, first ...string) (*bgRun, string, string) {
	t.Helper()
	marker := sleepMarker()
	w := sandboxtest.WorkDir(t)
	r := startRun(t, append(append([]string{"run", "--workdir", w}, flags...), "--", "sh", "-c", strings.Join(first, "")+sandboxScript(marker))...)
	r.workdir = w
	ns := r.line(t, "ns ", 30*time.Second)
	host, _ := os.Readlink("/proc/self/ns/pid")
	if !strings.HasPrefix(ns, "pid:[") || ns == host {
		t.Fatalf("the command's PID namespace is %q, the test's %q: want a namespace of its own", ns, host)
	}
	// sh and three sleeps, with bwrap's PID 1 (fast path) or init.
	var sleeps, members []int
	for i := 0; i < 250; i++ {
		if sleeps, members = withArgv("sleep", marker), inPIDNamespace(ns); len(sleeps) == 3 && len(members) >= 5 {
			return r, ns, marker
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("control: %d sleeps with the marker (want 3) and %d processes in the sandbox's namespace %s (want 5) seen (untested)", len(sleeps), len(members), ns)
	return r, ns, marker
}

// goneWithin fails unless, within d of since, no process is left in the
// sandbox's PID namespace, none carries marker and none of pids runs.
func goneWithin(t *testing.T, since time.Time, d time.Duration, ns, marker string, pids ...int) {
	t.Helper()
	var left []int
	for {
		left = append(inPIDNamespace(ns), withArgv("sleep", marker)...)
		for _, p := range pids {
			if running(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			t.Logf("nothing of the sandbox left %v after the kill", time.Since(since).Round(time.Millisecond))
			return
		}
		if time.Since(since) > d {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var desc []string
	for _, p := range left {
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		desc = append(desc, fmt.Sprintf("%d %q", p, bytes.ReplaceAll(cl, []byte{0}, []byte{' '})))
	}
	t.Errorf("%v after the kill, still running: %v", d, desc)
}

// TestFaultBwrapKilled: SIGKILL to the bwrap that sandbox-run started,
// while the command sleeps. sandbox-run says so in one line and exits 125,
// not 137 as if the command had died of SIGKILL, and nothing of the
// sandbox is left within a second.
func TestFaultBwrapKilled(t *testing.T) {
	needBwrap(t)
	for _, path := range faultPaths {
		t.Run(path.name, func(t *testing.T) {
			rep := filepath.Join(sandboxtest.WorkDir(t), "report.json")
			r, ns, marker := startSleeping(t, append([]string{"--report", rep}, path.flags...))
			bw := bwrapOf(t, r.cmd.Process.Pid)
			killed := time.Now()
			if err := syscall.Kill(bw, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			goneWithin(t, killed, time.Second, ns, marker)
			code := r.wait(t, 10*time.Second)
			msg := r.stderr.String()
			if code != 125 {
				t.Errorf("exit %d, want 125 (sandbox-run could not keep the sandbox; 137 would read as the command's SIGKILL)", code)
			}
			if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "bwrap was killed by signal 9") || !strings.Contains(msg, "the sandbox was ended") {
				t.Errorf("stderr %q: want one line saying bwrap was killed by signal 9 and the sandbox was ended", msg)
			}
			// The report is written and says what ended the run.
			var report struct {
				RunID string `json:"run_id"`
				Exit  struct {
					Code  int    `json:"code"`
					Class string `json:"class"`
				} `json:"exit"`
			}
			if b, err := os.ReadFile(rep); err != nil {
				t.Errorf("no report: %v", err)
			} else if err := json.Unmarshal(b, &report); err != nil || report.RunID == "" || report.Exit.Code != 125 || report.Exit.Class != "mechanism_killed" {
				t.Errorf("report exit %+v (%v); want 125, mechanism_killed", report.Exit, err)
			}
		})
	}
	// Control for the distinction: the command itself dying of SIGKILL
	// is still 137 and no such line (TestExitStatus covers the status;
	// this covers the message).
	t.Run("command SIGKILLed", func(t *testing.T) {
		for _, path := range faultPaths {
			r := run(t, "", append(append([]string{"run", "--workdir", sandboxtest.WorkDir(t)}, path.flags...), "--", "sh", "-c", "kill -KILL $$")...)
			if r.code != 137 || strings.Contains(r.stderr, "bwrap was killed") {
				t.Errorf("%s: exit %d stderr %q; want 137 and no word about bwrap", path.name, r.code, r.stderr)
			}
		}
	})
}

// TestFaultSandboxRunKilled: SIGKILL to sandbox-run itself; within a
// second nothing of the sandbox runs, bwrap included, on both launch
// paths. TestNothingOutlivesTheRun covers the same with a looser bound and
// the rlimit path to init.
func TestFaultSandboxRunKilled(t *testing.T) {
	needBwrap(t)
	for _, path := range faultPaths {
		t.Run(path.name, func(t *testing.T) {
			// The run's runtime directory (the built-in proxy's socket)
			// goes in here; it is removed as soon as the sandbox holds
			// the socket, so a kill after the start leaves nothing.
			tmp := sandboxtest.WorkDir(t)
			t.Setenv("TMPDIR", tmp)
			// The command creates .mcp.json, missing at start: it must not
			// outlive the kill for good.
			r, ns, marker := startSleeping(t, path.flags, `echo '{}' > .mcp.json && `)
			bw := bwrapOf(t, r.cmd.Process.Pid)
			killed := time.Now()
			if err := r.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			goneWithin(t, killed, time.Second, ns, marker, bw)
			if code := r.wait(t, 10*time.Second); code != -1 {
				t.Errorf("sandbox-run exit %d, want death by SIGKILL", code)
			}
			if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
				t.Errorf("left in TMPDIR after the kill: %s", ents[0].Name())
			}
			// What the command created at a missing protected path
			// (the control: it did create it) is either in the
			// quarantine already, moved by the live guard as it
			// appeared, or outlives the kill until the next run of the
			// same user quarantines it, whatever its workdir.
			w := r.workdir
			if _, err := os.Lstat(filepath.Join(w, ".mcp.json")); err != nil && !quarantinedLive(t, filepath.Join(w, ".mcp.json")) {
				t.Fatalf("control: the command's .mcp.json neither there after the kill nor quarantined (untested): %v", err)
			}
			if r := run(t, "", "run", "--workdir", sandboxtest.WorkDir(t), "--", "true"); r.code != 0 {
				t.Fatalf("the next run: exit %d, %s", r.code, r.stderr)
			}
			if ents, _ := os.ReadDir(w); len(ents) > 0 {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Errorf("left in the workdir after the next run: %v", names)
			}
		})
	}
}

// startNodeProxy serves `sandbox-run proxy` on a socket in a new directory
// with allow as its allow-list, and returns the socket and the process.
func startNodeProxy(t *testing.T, allow string) (string, *nodeProxy) {
	t.Helper()
	sock := filepath.Join(sandboxtest.WorkDir(t), "egress.sock")
	return sock, serveNodeProxy(t, sock, allow)
}

// nodeProxy is a running `sandbox-run proxy`.
type nodeProxy struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it has been waited for
}

// kill SIGKILLs the node proxy and waits (5 s at most) until it has been
// reaped. Not merely until its main thread is a zombie: its other threads
// may still be exiting then, and its listening socket, which they share,
// still accepts connections (a dial that finds the old proxy there would
// be taken for the new one's).
func (px *nodeProxy) kill() {
	px.cmd.Process.Kill()
	select {
	case <-px.exited:
	case <-time.After(5 * time.Second):
	}
}

// serveNodeProxy serves `sandbox-run proxy` on sock, killed when the test
// ends.
func serveNodeProxy(t *testing.T, sock, allow string) *nodeProxy {
	t.Helper()
	px := &nodeProxy{cmd: exec.Command(bin, "proxy", "--listen", sock, "--allow-host", allow), exited: make(chan struct{})}
	var errs lockedBuffer
	px.cmd.Stderr = &errs
	if err := px.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { px.cmd.Wait(); close(px.exited) }()
	t.Cleanup(func() {
		px.kill()
		if t.Failed() {
			t.Logf("node proxy stderr:\n%s", errs.String())
		}
	})
	for i := 0; i < 250; i++ {
		// Serving, not merely there: a killed proxy leaves its socket.
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			chownSocket(t, sock)
			return px
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("node proxy did not create %s within 5s: %s", sock, errs.String())
	return nil
}

// proxyScript is the sandboxed command of TestFaultNodeProxyGone. It makes
// the positive controls; starts two downloads of n bytes (plain and
// CONNECT), whose first kilobyte goes to dl-KIND and the rest is counted;
// says when both are under way; waits for ./go, which the test creates
// after the fault; reports the downloads, then makes an allowed request
// (plain and CONNECT), a refused one and a direct connection; and exits
// with a status of its own. Every wait is bounded.
func proxyScript(hostPort string, n int64) string {
	return fmt.Sprintf(`H=%s
echo "before-plain $(curl -sS -m 10 http://$H/ok 2>&1)"
echo "before-connect $(curl -sS -m 10 --proxytunnel http://$H/ok 2>&1)"
for k in plain connect; do
  opt=; [ $k = connect ] && opt=--proxytunnel
  { curl -sS -m 120 --limit-rate 20M $opt "http://$H/bytes?n=%d" 2>err-$k; echo $? >rc-$k; } |
    { head -c 1000 >dl-$k; wc -c >rest-$k; } &
done
i=0; while [ $i -lt 400 ] && ! { [ -s dl-plain ] && [ -s dl-connect ]; }; do sleep 0.05; i=$((i+1)); done
echo "inflight $(wc -c <dl-plain) $(wc -c <dl-connect)"
i=0; while [ $i -lt 600 ] && [ ! -e go ]; do sleep 0.05; i=$((i+1)); done
wait
for k in plain connect; do echo "inflight-$k exit=$(cat rc-$k) bytes=$(( $(wc -c <dl-$k) + $(cat rest-$k) )) $(cat err-$k)"; done
echo "after-plain $(curl -sS -m 10 -w ' code=%%{http_code}' http://$H/ok 2>&1 | tr '\n' ' ')"
echo "after-connect $(curl -sS -m 10 --proxytunnel http://$H/ok 2>&1)"
echo "refused $(curl -sS -m 10 -o /dev/null -w '%%{http_code}' http://169.254.169.254/ 2>&1)"
echo "direct $(curl -sS -m 5 --noproxy '*' http://$H/ok 2>&1)"
echo "end"
exit 7`, hostPort, n)
}

// TestFaultNodeProxyGone: the node's egress proxy (sandbox-run proxy, a
// process of its own) is killed, or its socket file removed, while a
// sandboxed command makes requests through HTTP_PROXY. Before the fault
// the same requests succeed (the positive controls).
//
// Killed: the downloads in flight fail with curl's error, new requests get
// the forwarder's 502 naming the unreachable socket, and the command goes
// on and exits with its own status. Removed: the downloads in flight
// finish, every new request gets the 502 (sandbox-run dials the node's
// socket by its path for each connection), and new runs are refused.
// Restarted at the same path: new requests reach the new proxy, under its
// policy. In all, a direct connection fails and the test host sees no
// connection but those a proxy made.
func TestFaultNodeProxyGone(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t) // the test host lives in a network namespace only root can wire up
	h := sandboxtest.NewTestHost(t, 3)
	const ok = "ok from test host"
	var allowed string // the allow-list of a restarted proxy
	// checkGone: with no proxy behind the path, every new request gets
	// the 502 naming the node's socket and why it cannot be reached.
	checkGone := func(t *testing.T, r *bgRun, sock, why string) {
		t.Helper()
		if l := r.line(t, "after-plain ", 30*time.Second); !strings.Contains(l, "code=502") ||
			!strings.Contains(l, "proxy socket "+sock+" is unreachable") || !strings.Contains(l, why) {
			t.Errorf("after-plain %q; want 502 and a body saying %s is unreachable (%s)", l, sock, why)
		}
		if l := r.line(t, "after-connect ", 30*time.Second); !strings.Contains(l, "response 502") {
			t.Errorf("after-connect %q; want the CONNECT answered 502", l)
		}
		if l := r.line(t, "refused ", 30*time.Second); l != "502" {
			t.Errorf("refused %q; want 502", l)
		}
	}
	tests := []struct {
		name string
		// n is the size of the downloads in flight: the fault must come
		// while they run (4 GB at 20 MB/s: minutes), or they must
		// finish after it (40 MB: 2 s).
		n     int64
		fault func(t *testing.T, sock string, px *nodeProxy)
		// check checks the lines the command printed after the fault.
		check func(t *testing.T, r *bgRun, sock string)
		// maxConns is how many connections the test host may see after
		// the fault, besides the test's own: those of the proxy (which
		// may reuse one it keeps alive).
		maxConns int
	}{
		{
			name:  "proxy killed",
			n:     4e9,
			fault: func(t *testing.T, sock string, px *nodeProxy) { px.kill() },
			check: func(t *testing.T, r *bgRun, sock string) {
				for _, k := range []string{"inflight-plain ", "inflight-connect "} {
					if l := r.line(t, k, 30*time.Second); strings.HasPrefix(l, "exit=0") || !strings.Contains(l, "curl: (") {
						t.Errorf("%s%q; want the download in flight to fail with curl's error", k, l)
					}
				}
				checkGone(t, r, sock, "connection refused")
			},
		},
		{
			name: "socket removed",
			n:    4e7,
			fault: func(t *testing.T, sock string, px *nodeProxy) {
				if err := os.Remove(sock); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, r *bgRun, sock string) {
				// Connections made before the removal are the running
				// proxy's own and finish; new ones dial the path.
				for _, k := range []string{"inflight-plain ", "inflight-connect "} {
					if l := r.line(t, k, 30*time.Second); !strings.HasPrefix(l, "exit=0 bytes=40000000") {
						t.Errorf("%s%q; want the download in flight to complete", k, l)
					}
				}
				checkGone(t, r, sock, "no such file or directory")
			},
		},
		{
			name: "proxy restarted",
			n:    4e9,
			fault: func(t *testing.T, sock string, px *nodeProxy) {
				px.kill()
				serveNodeProxy(t, sock, allowed)
			},
			check: func(t *testing.T, r *bgRun, sock string) {
				for _, k := range []string{"inflight-plain ", "inflight-connect "} {
					if l := r.line(t, k, 30*time.Second); strings.HasPrefix(l, "exit=0") {
						t.Errorf("%s%q; want the download in flight to end with the old proxy", k, l)
					}
				}
				// The sandbox reaches the new proxy at the same path, and
				// its policy holds.
				if l := r.line(t, "after-plain ", 30*time.Second); l != ok+" code=200" {
					t.Errorf("after-plain %q; want the restarted proxy to serve it", l)
				}
				if l := r.line(t, "after-connect ", 30*time.Second); l != ok {
					t.Errorf("after-connect %q; want the restarted proxy to serve it", l)
				}
				if l := r.line(t, "refused ", 30*time.Second); l != "403" {
					t.Errorf("refused %q; want the restarted proxy's 403", l)
				}
			},
			maxConns: 2, // after-plain and after-connect, through the new proxy
		},
	}
	allowed = h.HostPort()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock, px := startNodeProxy(t, h.HostPort())
			w := sandboxtest.WorkDir(t)
			r := startRun(t, "run", "--workdir", w, "--egress-socket", sock, "--", "sh", "-c", proxyScript(h.HostPort(), tt.n))
			if l := r.line(t, "before-plain ", 30*time.Second); l != ok {
				t.Fatalf("control: plain request through the node proxy: %q (untested)", l)
			}
			if l := r.line(t, "before-connect ", 30*time.Second); l != ok {
				t.Fatalf("control: CONNECT through the node proxy: %q (untested)", l)
			}
			if l := r.line(t, "inflight ", 30*time.Second); l != "1000 1000" {
				t.Fatalf("control: the downloads were not under way before the fault: %q", l)
			}
			before := h.Count(t) // direct from the test: the host is reachable
			tt.fault(t, sock, px)
			if err := os.WriteFile(filepath.Join(w, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			tt.check(t, r, sock)
			if l := r.line(t, "direct ", 30*time.Second); strings.Contains(l, ok) || !strings.Contains(l, "curl: (") {
				t.Errorf("direct %q; want a direct connection to fail", l)
			}
			r.line(t, "end", 30*time.Second)
			if code := r.wait(t, 30*time.Second); code != 7 {
				t.Errorf("exit %d, want the command's own 7; stderr %q", code, r.stderr.String())
			}
			if n := h.Count(t) - before - 1; n < 0 || n > tt.maxConns {
				t.Errorf("the test host saw %d connections after the fault, want at most %d", n, tt.maxConns)
			}
			if tt.name == "socket removed" {
				// A new run finds no socket and is refused.
				oneLine(t, run(t, "", "run", "--workdir", w, "--egress-socket", sock, "--", "true"), sock, "does not exist", "fix:")
			}
		})
	}
}

// mountTmpfs mounts a tmpfs of size (mount's syntax, "1m") on a new
// workdir owned by the sandbox's uid, unmounted when the test ends.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := sandboxtest.WorkDir(t)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size+",mode=0755,uid=65534,gid=65534"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// TestFaultWorkdirFull: the workdir's file system fills up while the
// command writes. The command sees ENOSPC; sandbox-run exits with the
// command's status, notes the full file system in the report, and leaves
// nothing in the workdir but the command's own file. The control: the
// same writes on a bigger file system succeed, with no note.
func TestFaultWorkdirFull(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t) // mounting a tmpfs
	// 2 MiB in 64 KiB writes; the command first creates an empty .mcp.json (a
	// missing protected path, quarantined as the run ends; empty, it takes
	// no block of the full file system), listed while
	// it runs, so that the check that the workdir ends with only f has
	// something to check.
	const script = `: > .mcp.json; echo "during $(ls -A | tr '\n' ' ')"
dd if=/dev/zero of=f bs=64k count=32 || exit 3
echo wrote`
	for _, path := range launchPaths {
		for _, tt := range []struct {
			size string
			full bool
		}{{"8m", false}, {"1m", true}} {
			t.Run(fmt.Sprintf("%s/%s", path.name, tt.size), func(t *testing.T) {
				w := mountTmpfs(t, tt.size)
				rep := filepath.Join(sandboxtest.WorkDir(t), "report.json")
				args := append(append([]string{"run", "--workdir", w, "--report", rep, "--summary"}, path.flags...), "--", "sh", "-c", script)
				r := run(t, "", args...)
				// The control: the command made .mcp.json (listed before
				// the live guard moved it, or named by its quarantine line).
				made := strings.Contains(r.stdout, ".mcp.json") || strings.Contains(r.stderr, "quarantined "+filepath.Join(w, ".mcp.json")+":")
				if !strings.Contains(r.stdout, "during ") || !made {
					t.Fatalf("control: no .mcp.json made during the run (untested): %q %q", r.stdout, r.stderr)
				}
				var report struct {
					Notes []string `json:"notes"`
					Full  []string `json:"full_filesystems"`
				}
				if b, err := os.ReadFile(rep); err != nil {
					t.Fatalf("no report: %v", err)
				} else if err := json.Unmarshal(b, &report); err != nil {
					t.Fatal(err)
				}
				note := "the workdir's file system (" + w + ") is full"
				hasNote := slices.ContainsFunc(report.Notes, func(n string) bool { return strings.Contains(n, note) })
				if tt.full {
					if r.code != 3 {
						t.Errorf("exit %d, want the command's own 3; stderr %q", r.code, r.stderr)
					}
					if !strings.Contains(r.stderr, "No space left on device") {
						t.Errorf("the command did not see ENOSPC: %q", r.stderr)
					}
					if !hasNote || !strings.Contains(r.stderr, "note         "+note) || !slices.Equal(report.Full, []string{w}) {
						t.Errorf("report notes %q, full_filesystems %q / summary %q: want %q", report.Notes, report.Full, r.stderr, note)
					}
					// Without --summary, one line on stderr says it.
					r2 := run(t, "", append(append([]string{"run", "--workdir", w}, path.flags...), "--", "sh", "-c", "echo x > g; rc=$?; rm -f g; exit $rc")...)
					if r2.code == 0 || !strings.Contains(r2.stderr, "sandbox-run: note: the file system of "+w+" is full") {
						t.Errorf("a write to the full workdir: exit %d, stderr %q; want a failure and sandbox-run's note", r2.code, r2.stderr)
					}
				} else {
					if r.code != 0 || !strings.Contains(r.stdout, "wrote") || strings.Contains(r.stderr, "No space") {
						t.Errorf("control: 2 MiB on %s failed: exit %d %q %q", tt.size, r.code, r.stdout, r.stderr)
					}
					if hasNote {
						t.Errorf("control: a full-disk note although the disk is not full: %q", report.Notes)
					}
				}
				ents, err := os.ReadDir(w)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				if !slices.Equal(names, []string{"f"}) {
					t.Errorf("workdir holds %q after the run, want only the command's f", names)
				}
			})
		}
	}
}

// quarantinedLive says whether the live guard of some run moved path to
// the quarantine (XDG_CACHE_HOME/sandbox-run/quarantine/RUN/path).
func quarantinedLive(t *testing.T, path string) bool {
	t.Helper()
	q := filepath.Join(os.Getenv("XDG_CACHE_HOME"), "sandbox-run", "quarantine")
	runs, err := os.ReadDir(q)
	if err != nil {
		return false
	}
	for _, r := range runs {
		if _, err := os.Lstat(filepath.Join(q, r.Name(), path)); err == nil {
			return true
		}
	}
	return false
}
