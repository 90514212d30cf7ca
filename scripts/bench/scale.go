//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/proxy"
)

// ---- helper modes -------------------------------------------------------

// loadResult is what `load` prints.
type loadResult struct {
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	FirstErr string  `json:"first_err,omitempty"`
	Seconds  float64 `json:"seconds"`
	Bytes    int64   `json:"bytes"`
	LatNS    []int64 `json:"lat_ns"`
}

// proxyUnixMain is the hidden mode `proxy-unix SOCK ALLOW...`: the egress
// proxy package on a Unix socket, in this process, which (unlike
// `sandbox-run proxy`) can say how many goroutines it runs: every line on
// stdin is answered with runtime.NumGoroutine(). It prints "ready" once
// listening and exits when stdin closes.
func proxyUnixMain(args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: proxy-unix SOCK ALLOW...")
		return 2
	}
	p, err := proxy.New(proxy.Config{Allow: args[1:]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("unix", args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fmt.Println(runtime.NumGoroutine())
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	return 0
}

// ---- process sampling ---------------------------------------------------

// procSample is one look at a process: memory, descriptors, threads.
type procSample struct {
	rssKB, hwmKB int64
	fds, threads int
}

func sampleProc(pid int) (procSample, bool) {
	p, ok := readProc(pid)
	if !ok {
		return procSample{}, false
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return procSample{}, false
	}
	return procSample{rssKB: p.rssKB, hwmKB: p.hwmKB, fds: len(ents), threads: p.threads}, true
}

func (s procSample) max(o procSample) procSample {
	return procSample{rssKB: max(s.rssKB, o.rssKB), hwmKB: max(s.hwmKB, o.hwmKB), fds: max(s.fds, o.fds), threads: max(s.threads, o.threads)}
}

// sampler samples pid every 25 ms until stop is called, which returns
// the largest values seen.
func sampler(pid int, extra func()) (stop func() procSample) {
	var peak procSample
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(25 * time.Millisecond)
		defer t.Stop()
		for i := 0; i < 40*600; i++ { // at most ten minutes
			if s, ok := sampleProc(pid); ok {
				peak = peak.max(s)
			}
			if extra != nil {
				extra()
			}
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() procSample { close(quit); <-done; return peak }
}

// upstreamConns counts pid's established TCP connections to remote port
// port (its idle pool to the test host, once the load has ended), from
// /proc/PID/fd and /proc/PID/net/tcp{,6}.
func upstreamConns(pid, port int) int {
	inodes := map[string]bool{}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, d := range ents {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, d.Name())); err == nil {
			if in, ok := strings.CutPrefix(l, "socket:["); ok {
				inodes[strings.TrimSuffix(in, "]")] = true
			}
		}
	}
	n := 0
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			x := strings.Fields(l)
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if len(x) >= 10 && strings.HasSuffix(x[2], want) && x[3] == "01" && inodes[x[9]] {
				n++
			}
		}
	}
	return n
}

// ---- the node-wide proxy ------------------------------------------------

// nodeProxy is `sandbox-run proxy --listen SOCK --allow-host HOST` as a
// child, run as the sandbox uid (65534) when we are root so that sandboxes
// may use its socket (--egress-socket): the unprivileged service account
// a node would give it.
type nodeProxy struct {
	cmd    *exec.Cmd
	sock   string
	stderr *bytes.Buffer
}

func startNodeProxy(bin, dir, allow string) (*nodeProxy, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &nodeProxy{sock: filepath.Join(dir, "egress.sock"), stderr: &bytes.Buffer{}}
	p.cmd = exec.Command(bin, "proxy", "--listen", p.sock, "--allow-host", allow)
	p.cmd.Stderr = &limitedWriter{w: p.stderr, n: 64 << 10}
	p.cmd.WaitDelay = 5 * time.Second
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, 65534, 65534); err != nil {
			return nil, err
		}
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	for i := 0; i < 200; i++ {
		if c, err := net.DialTimeout("unix", p.sock, time.Second); err == nil {
			c.Close()
			return p, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.close()
	return nil, fmt.Errorf("sandbox-run proxy did not listen on %s within 10 s: %s", p.sock, lastLines(p.stderr.String(), 5))
}

func (p *nodeProxy) close() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.cmd = nil
}

// ---- measurements -------------------------------------------------------

// burstResult is one batch of sandboxes started at once.
type burstResult struct {
	wall     time.Duration
	each     sample
	failures int
	firstErr string
}

// burst starts n copies of v at once and waits for all of them.
func burst(v netVariant, fetchArgs []string, n int) burstResult {
	var (
		mu  sync.Mutex
		res burstResult
		wg  sync.WaitGroup
	)
	gate := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			t := time.Now()
			fr, err := netRun(v, fetchArgs, runTimeout)
			d := time.Since(t)
			if err == nil && fr.Bytes == 0 {
				err = errors.New("empty answer")
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.failures++
				if res.firstErr == "" {
					res.firstErr = err.Error()
				}
				return
			}
			res.each = append(res.each, d)
		}()
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	res.wall = time.Since(start)
	return res
}

// Names of the scale variants.
const (
	sBuiltin = "50 × sandbox-run run --allow-host H (each its own proxy)"
	sNode    = "50 × sandbox-run run --egress-socket S (one node-wide proxy)"
	sSingle  = "1 × sandbox-run run --allow-host H (alone, for comparison)"
)

// loadRun is one load client run against one path.
type loadRun struct {
	res      loadResult
	wall     time.Duration
	peak     procSample
	upstream int64 // connections the test host accepted during the run
	// CPU time (user and system) during the run of the proxy process
	// (0 on a direct path) and of the load clients' process.
	proxyCPU, clientCPU time.Duration
}

// scaleResults is section 5.
type scaleResults struct {
	n, conns, perConn int
	bursts            map[string][]burstResult
	burstErr          map[string]error
	nodeErr           error

	rate     int // requests per second of the paced loads
	loads    map[string][]loadRun
	loadErr  map[string]error
	baseline procSample // the node-wide proxy, idle, before any load
	after    procSample // the same, once its descriptors were back (or after the wait)
	afterRSS procSample // 5 s after the last load
	backIn   time.Duration
	back     bool
	pooled   int        // of the fds left, upstream connections idling in the proxy's pool
	final    procSample // before it was stopped

	goroutines goroutineCounts
}

// goroutineCounts are the proxy package's goroutines under the load
// (measureGoroutines).
type goroutineCounts struct {
	baseline, peak, after int
	pooled                int // the helper's idle upstream connections at "after"
	err                   error
}

// measureScale is section 5: bursts of n sandboxes, each fetching /ok
// through its proxy path, and the node-wide proxy under conns concurrent
// connections (perConn requests each, at full speed and paced at pace
// requests per second in all), interleaved with the same load straight
// to the test host.
func (e *env) measureScale(h *testHost, n, rounds, conns, perConn, loadRounds, pace int, deadline time.Time) *scaleResults {
	res := &scaleResults{n: n, conns: conns, perConn: perConn, bursts: map[string][]burstResult{}, burstErr: map[string]error{},
		loads: map[string][]loadRun{}, loadErr: map[string]error{}}
	np, err := startNodeProxy(e.bin, filepath.Join(e.base, "nodeproxy"), h.addr.String())
	if err != nil {
		res.nodeErr = err
		return res
	}
	defer np.close()
	atExit(np.close)
	time.Sleep(200 * time.Millisecond)
	pid := np.cmd.Process.Pid
	res.baseline, _ = sampleProc(pid)

	ok := []string{"-url", h.url("/ok")}
	sandboxVariant := func(extra ...string) netVariant {
		return netVariant{cmd: func(ctx context.Context, a []string) *exec.Cmd {
			args := append([]string{"run", "--workdir", e.work, "--read", e.binDir}, extra...)
			args = append(append(args, "--", e.exe, "fetch"), a...)
			return exec.CommandContext(ctx, e.bin, args...)
		}}
	}
	vs := []struct {
		name string
		v    netVariant
		n    int
	}{
		{sBuiltin, sandboxVariant("--allow-host", h.addr.String()), n},
		{sNode, sandboxVariant("--egress-socket", np.sock), n},
		{sSingle, sandboxVariant("--allow-host", h.addr.String()), 1},
	}
	fmt.Fprintf(os.Stderr, "bench: scale: %d rounds of %d sandboxes at once\n", rounds, n)
	for r := 0; r < rounds; r++ {
		if r > 0 && time.Now().After(deadline) {
			break
		}
		for k := range vs {
			v := vs[(k+r)%len(vs)]
			b := burst(v.v, ok, v.n)
			res.bursts[v.name] = append(res.bursts[v.name], b)
			if b.failures > 0 {
				fmt.Fprintf(os.Stderr, "bench: scale: %s: %d failures: %s\n", v.name, b.failures, b.firstErr)
			}
		}
	}

	// The load: the node-wide proxy (sampled) and the same clients with
	// no proxy, interleaved, at full speed and paced.
	fmt.Fprintf(os.Stderr, "bench: scale: %d rounds of %d connections x %d requests, full speed and paced at %d/s\n", loadRounds, conns, perConn, pace)
	res.rate = pace
	res.loads, res.loadErr = e.runLoads(h, e.withRelay(h, loadPaths(h, np.sock, pid, conns, perConn, pace), conns, perConn), loadRounds, deadline)
	// Back to baseline: descriptors first (they should return at once),
	// then RSS, which the Go runtime gives back lazily.
	start := time.Now()
	for i := 0; i < 150; i++ {
		s, ok := sampleProc(pid)
		if !ok {
			break
		}
		res.after = s
		res.pooled = upstreamConns(pid, int(h.addr.Port()))
		if s.fds <= res.baseline.fds+res.pooled {
			res.back = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.backIn = time.Since(start)
	time.Sleep(max(0, 5*time.Second-res.backIn))
	res.afterRSS, _ = sampleProc(pid)
	res.final = res.afterRSS

	e.measureGoroutines(h, res, []string{"load", "-url", h.url("/ok"), "-conns", fmt.Sprint(conns), "-n", fmt.Sprint(perConn), "-hold", "400ms"})
	return res
}

// runLoad runs the load client once and reads its result; it also counts
// the connections the test host accepted meanwhile.
func (e *env) runLoad(h *testHost, args []string) (loadRun, error) {
	before, _ := hostCount(h)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, e.exe, args...)
	var out, stderr bytes.Buffer
	c.Stdout, c.Stderr = &out, &stderr
	c.WaitDelay = 5 * time.Second
	t := time.Now()
	err := c.Run()
	lr := loadRun{wall: time.Since(t)}
	if c.ProcessState != nil {
		lr.clientCPU = c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	}
	if err != nil {
		return lr, fmt.Errorf("%v: %s", err, lastLines(stderr.String(), 5))
	}
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &lr.res); err != nil {
		return lr, fmt.Errorf("load output: %v", err)
	}
	if lr.res.Errors > 0 {
		return lr, fmt.Errorf("%d of %d requests failed; first: %s", lr.res.Errors, lr.res.Errors+lr.res.Requests, lr.res.FirstErr)
	}
	if after, err := hostCount(h); err == nil {
		lr.upstream = after - before - 1 // minus the /count request itself
	}
	return lr, nil
}

// hostCount asks the test host how many connections it accepted so far.
func hostCount(h *testHost) (int64, error) {
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := c.Get(h.url("/count"))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// measureGoroutines runs the same load once against the proxy package in
// this program's proxy-unix mode, asking it for runtime.NumGoroutine()
// before, during (every 50 ms) and 2 s after. `sandbox-run proxy` has no
// way to report its goroutines, so this is the stand-in the report names.
func (e *env) measureGoroutines(h *testHost, res *scaleResults, loadArgs []string) {
	g := &res.goroutines
	sock := filepath.Join(e.base, "helper-egress.sock")
	hp, err := startProxyUnix(e.exe, sock, h.addr.String())
	if err != nil {
		g.err = err
		return
	}
	defer hp.stop()
	if g.err = hp.ready(); g.err != nil {
		return
	}
	time.Sleep(100 * time.Millisecond)
	if g.baseline, err = hp.ask(); err != nil {
		g.err = err
		return
	}
	var mu sync.Mutex
	var askErr error
	stop := sampler(hp.cmd.Process.Pid, func() {
		n, err := hp.ask()
		mu.Lock()
		defer mu.Unlock()
		if err != nil && askErr == nil {
			askErr = err
		}
		g.peak = max(g.peak, n)
	})
	_, lerr := e.runLoad(h, append(append([]string{}, loadArgs...), "-sock", sock))
	stop()
	if lerr != nil || askErr != nil {
		g.err = errors.Join(lerr, askErr)
		return
	}
	time.Sleep(2 * time.Second)
	g.after, g.err = hp.ask()
	g.pooled = upstreamConns(hp.cmd.Process.Pid, int(h.addr.Port()))
}

// proxyUnix is this program in proxy-unix mode: the proxy package on a
// Unix socket, answering its goroutine count, one line per "g" asked.
type proxyUnix struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string // its stdout, line by line; closed when it ends
}

// startProxyUnix starts exe's proxy-unix mode on sock, relaying to
// upstream, and reads its output in the background. The caller must stop
// it, ready or not.
func startProxyUnix(exe, sock, upstream string) (*proxyUnix, error) {
	c := exec.Command(exe, "proxy-unix", sock, upstream)
	c.Stderr = os.Stderr
	c.WaitDelay = 5 * time.Second
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	p := &proxyUnix{cmd: c, in: in, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(outp)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p, nil
}

// ready waits up to 10 s for the helper's "ready" line.
func (p *proxyUnix) ready() error {
	select {
	case l := <-p.lines:
		if l != "ready" {
			return fmt.Errorf("proxy-unix: %q", l)
		}
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("proxy-unix did not start")
	}
}

// ask asks the helper for its goroutine count and waits up to 5 s for it.
func (p *proxyUnix) ask() (int, error) {
	if _, err := io.WriteString(p.in, "g\n"); err != nil {
		return 0, err
	}
	select {
	case l, ok := <-p.lines:
		if !ok {
			return 0, errors.New("proxy-unix ended")
		}
		return strconv.Atoi(l)
	case <-time.After(5 * time.Second):
		return 0, errors.New("proxy-unix did not answer")
	}
}

// stop closes the helper's stdin, which ends it, and waits for it; it is
// killed if it has not ended after 10 s.
func (p *proxyUnix) stop() {
	p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// ---- report -------------------------------------------------------------

// scaleSection is section 5: bursts of sandboxes at once, then the
// node-wide proxy under load (its process and goroutines).
func (r *report) scaleSection(w func(string, ...any)) {
	w("## 5. Scale\n\n")
	s := r.scale
	if s == nil {
		w("Not measured: %v\n\n", r.netErr)
		return
	}
	if s.nodeErr != nil {
		w("Not measured: the node-wide proxy did not start: %s\n\n", oneLine(s.nodeErr.Error()))
		return
	}
	r.burstSection(w, s)
	w("### The node-wide proxy under %d concurrent connections\n\n", s.conns)
	r.loadTable(w)
	if d, p := s.loads[lDirect], s.loads[lProxy]; len(d) > 0 && len(p) > 0 {
		proxyProcess(w, s, peakOf(p))
		if up := medianUpstream(p); up > 0 {
			w("The test host accepted %.0f connections per proxied run for %d requests: the proxy keeps up to 512 idle upstream "+
				"connections per host (proxy/proxy.go, maxIdleUpstreamPerHost), so %d concurrent clients of one host reuse them; a request that "+
				"finds none idle opens a new one, and each one closed beyond the pool's room leaves a TIME_WAIT socket on the proxy's side. "+
				"With no proxy each client reuses its one connection.\n\n", up, s.conns*s.perConn, s.conns)
		}
	}
	goroutineText(w, s.goroutines)
	r.failures(w, s.loadErr)
}

// burstSection is "n sandboxes at once": the bursts' table, how much one
// burst takes against a sandbox alone, and each burst's failures.
func (r *report) burstSection(w func(string, ...any), s *scaleResults) {
	w("### %d sandboxes at once\n\n", s.n)
	w("%d copies of `sandbox-run run --read BIN … -- sbx-bench fetch -url http://HOST:8080/ok` started at the same moment "+
		"(one goroutine each, released together), each making one request through its proxy path to the test host of section 3: "+
		"with `--allow-host HOST:8080` every sandbox runs its own built-in proxy; with `--egress-socket S` all of them share "+
		"one `sandbox-run proxy --listen S` (run as uid 65534, the sandbox uid). A single sandbox alone ran in the same rounds. "+
		"Wall time from the release to the last exit; rounds interleaved.\n\n", s.n)
	w("| variant | rounds | failures | wall (median) | min | max | one sandbox's time in the burst (median / max) | wall per sandbox |\n")
	w("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	single := burstWall(s.bursts[sSingle]).median()
	for _, name := range []string{sBuiltin, sNode, sSingle} {
		if bs := s.bursts[name]; len(bs) > 0 {
			burstRow(w, name, bs)
		}
	}
	w("\n")
	if b := burstWall(s.bursts[sBuiltin]).median(); b > 0 && single > 0 {
		w("%d sandboxes at once take **%s** the wall time of one alone (%s vs %s): on %d cores, the starts queue for the CPU; "+
			"started one after another they would take about %s.\n\n",
			s.n, ratio(b, single), ms(b), ms(single), r.info.cores, ms(single*time.Duration(s.n)))
	}
	for _, name := range []string{sBuiltin, sNode, sSingle} {
		for _, b := range s.bursts[name] {
			if b.failures > 0 {
				w("- %s: %d failures, first: `%s`\n", name, b.failures, oneLine(b.firstErr))
			}
		}
	}
	r.failures(w, s.burstErr)
}

// burstRow is one variant's row of the bursts' table, over its rounds bs
// (at least one).
func burstRow(w func(string, ...any), name string, bs []burstResult) {
	walls, each := burstWall(bs), sample{}
	fails := 0
	n := 0
	for _, b := range bs {
		each = append(each, b.each...)
		fails += b.failures
		n += len(b.each) + b.failures
	}
	per := walls.median() / time.Duration(max(1, n/len(bs)))
	w("| %s | %d | %d of %d | %s | %s | %s | %s / %s | %s |\n", name, len(bs), fails, n, ms(walls.median()), ms(walls.min()), ms(walls.max()),
		ms(each.median()), ms(each.max()), ms(per))
}

// peakOf is the peak of every figure over runs, each on its own.
func peakOf(runs []loadRun) procSample {
	peak := procSample{}
	for _, lr := range runs {
		peak = peak.max(lr.peak)
	}
	return peak
}

// proxyProcess is the node-wide proxy process's table (idle, at the peak,
// after) and what it says: whether descriptors came back, and why RSS
// need not have.
func proxyProcess(w func(string, ...any), s *scaleResults, peak procSample) {
	w("| `sandbox-run proxy` process | VmRSS | VmHWM | open fds | threads |\n|---|---:|---:|---:|---:|\n")
	w("| idle, before any load | %s | %s | %d | %d |\n", mib(s.baseline.rssKB), mib(s.baseline.hwmKB), s.baseline.fds, s.baseline.threads)
	w("| peak during the loads | %s | %s | %d | %d |\n", mib(peak.rssKB), mib(peak.hwmKB), peak.fds, peak.threads)
	w("| when the fds were back (%s after the last load) | %s | %s | %d | %d |\n", roundDur(s.backIn), mib(s.after.rssKB), mib(s.after.hwmKB), s.after.fds, s.after.threads)
	w("| 5 s after the last load | %s | %s | %d | %d |\n\n", mib(s.afterRSS.rssKB), mib(s.afterRSS.hwmKB), s.afterRSS.fds, s.afterRSS.threads)
	if s.back {
		w("Descriptors return to the baseline (%d) plus the proxy's idle upstream pool (%d established connections to the test host, "+
			"which the pool closes after 90 s idle) %s after the clients close; ", s.baseline.fds, s.pooled, roundDur(s.backIn))
	} else {
		w("Descriptors did **not** return to the baseline (%d) plus the idle upstream pool (%d) within %s (%d open); ",
			s.baseline.fds, s.pooled, roundDur(s.backIn), s.after.fds)
	}
	w("at the peak the proxy held %d descriptors for %d client connections (each proxied connection holds the client's and, "+
		"while a request is in flight or an upstream connection idles in the pool, an upstream one). "+
		"Threads are OS threads of the Go runtime, which keeps them once created; they are not a leak measure.\n\n", peak.fds, s.conns)
	if s.afterRSS.rssKB > s.baseline.rssKB*3/2 {
		w("RSS had not come back 5 s after the load (%s against %s idle): the Go runtime keeps freed heap and returns it to the "+
			"kernel lazily (its background scavenger), so at this time scale RSS says how much the load needed, not whether "+
			"anything leaked; descriptors and goroutines do.\n\n", mib(s.afterRSS.rssKB), mib(s.baseline.rssKB))
	} else {
		w("RSS was back near the idle level 5 s after the load (%s against %s).\n\n", mib(s.afterRSS.rssKB), mib(s.baseline.rssKB))
	}
}

// goroutineText says what the proxy package's goroutine counts were, and
// that they come from the in-process stand-in, not sandbox-run proxy.
func goroutineText(w func(string, ...any), g goroutineCounts) {
	w("Goroutines: `sandbox-run proxy` has no way to report them (no debug endpoint, no pprof), so the same load ran once against the same " +
		"`proxy` package inside this program (`proxy-unix` mode, answering `runtime.NumGoroutine()` on request): ")
	if g.err != nil {
		w("that failed: %s.\n\n", oneLine(g.err.Error()))
	} else {
		w("**%d** idle, **%d** at the peak, **%d** 2 s after the clients closed, when %d upstream connections idled in its pool "+
			"(an idle pooled HTTP/1 connection holds two goroutines, its read and write loops, so %d is the baseline plus the pool).\n\n",
			g.baseline, g.peak, g.after, g.pooled, g.baseline+2*g.pooled)
	}
}

func burstWall(bs []burstResult) sample {
	var s sample
	for _, b := range bs {
		s = append(s, b.wall)
	}
	return s
}

func pooled(runs []loadRun) sample {
	var s sample
	for _, lr := range runs {
		for _, ns := range lr.res.LatNS {
			s = append(s, time.Duration(ns))
		}
	}
	return s
}

func rate(runs []loadRun) float64 {
	var xs []float64
	for _, lr := range runs {
		xs = append(xs, float64(lr.res.Requests)/lr.res.Seconds)
	}
	return median(xs)
}

func medianUpstream(runs []loadRun) float64 {
	var xs []float64
	for _, lr := range runs {
		xs = append(xs, float64(lr.upstream))
	}
	return median(xs)
}

// medianCPUPerRequest is the median over runs of the proxy's (proxy true)
// or the clients' CPU time per request, in microseconds.
func medianCPUPerRequest(runs []loadRun, proxy bool) float64 {
	var xs []float64
	for _, lr := range runs {
		cpu := lr.clientCPU
		if proxy {
			cpu = lr.proxyCPU
		}
		if lr.res.Requests > 0 {
			xs = append(xs, float64(cpu.Microseconds())/float64(lr.res.Requests))
		}
	}
	return median(xs)
}

// procCPU is the CPU time pid has used so far (user and system, from
// /proc/PID/stat, in clock ticks of 10 ms: Linux's USER_HZ is 100 on
// every architecture Go supports).
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	st, err2 := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}

func roundDur(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }

// scaleGoals are the summary rows for section 5.
func (r *report) scaleGoals() [][3]string {
	s := r.scale
	if s == nil || s.nodeErr != nil {
		return nil
	}
	var rows [][3]string
	for _, name := range []string{sBuiltin, sNode} {
		bs := s.bursts[name]
		if len(bs) == 0 {
			continue
		}
		fails, n := 0, 0
		for _, b := range bs {
			fails += b.failures
			n += len(b.each) + b.failures
		}
		short := strings.SplitN(name, " (", 2)[0]
		rows = append(rows, [3]string{fmt.Sprintf("scale: %s, failures = 0", short),
			fmt.Sprintf("%d failures in %d starts; wall %s (median of %d)", fails, n, ms(burstWall(bs).median()), len(bs)),
			verdict(fails == 0, fmt.Sprintf("%d failed", fails))})
	}
	rows = append(rows, r.loadGoals()...)
	if p := s.loads[lProxy]; len(p) > 0 {
		peak := peakOf(p)
		rows = append(rows, [3]string{"scale: proxy's fds back to baseline (+ idle upstream pool) after the load",
			fmt.Sprintf("%d → %d → %d (%d pooled) in %s", s.baseline.fds, peak.fds, s.after.fds, s.pooled, roundDur(s.backIn)),
			verdict(s.back, fmt.Sprintf("%d more than baseline + pool", s.after.fds-s.baseline.fds-s.pooled))})
	}
	if g := s.goroutines; g.err == nil && g.peak > 0 {
		want := g.baseline + 2*g.pooled
		rows = append(rows, [3]string{"scale: proxy goroutines back to baseline (+ 2 per pooled conn; proxy package in-process)",
			fmt.Sprintf("%d → %d → %d (%d pooled)", g.baseline, g.peak, g.after, g.pooled), verdict(g.after <= want, fmt.Sprintf("%d more", g.after-want))})
	}
	return rows
}

// withRelay adds the bare relay's path to paths (the floor of any relay),
// or says on stderr why it could not start.
func (e *env) withRelay(h *testHost, paths []loadPath, conns, perConn int) []loadPath {
	sock := filepath.Join(e.base, "relay.sock")
	rl, err := startRelay(e.exe, sock, h.addr.String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: scale: relay:", err)
		return paths
	}
	atExit(rl.close)
	return append(paths, relayPath(h, sock, rl.cmd.Process.Pid, conns, perConn))
}
