//go:build linux

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"
)

// Names of the load paths (section 5): the same clients, straight to the
// test host and through the node-wide proxy, at full speed (each client
// sends its next request when the last is answered: the rate says how
// many requests the path can carry) and paced (a fixed rate in all: the
// latency says what the path adds while it is not saturated).
const (
	lDirect      = "no proxy (straight to the test host)"
	lProxy       = "sandbox-run proxy (node-wide, Unix socket)"
	lDirectPaced = "no proxy, paced"
	lProxyPaced  = "sandbox-run proxy, paced"
)

// Goals of the node-wide proxy under load (issue 36).
const (
	loadGoalRatio = 0.8                   // full speed: at least this share of the request rate with no proxy
	loadGoalP99   = 20 * time.Millisecond // paced: p99 at most this
)

// loadMain is the hidden mode `load -url URL [-sock SOCK] -conns C -n N
// [-rate R] [-hold D]`: C clients at once, each on its own connection (to
// the proxy on the Unix socket SOCK, or straight to the host without
// -sock), each making N sequential GETs of URL and reading every body to
// the end. Without -rate each client sends its next request as soon as
// the last is answered; with -rate R the C clients send R requests per
// second in all, client i its k-th request at start + (i/C + k)·C/R, and a
// request's latency counts from that moment (not from when a late client
// got to send it), so that a stall is not hidden by the requests it
// delayed. All connections stay open for D after the last request (so that
// the proxy's peak descriptors can be sampled), then the result goes to
// stdout as one JSON line.
func loadMain(args []string) int {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	target := fs.String("url", "", "URL")
	sock := fs.String("sock", "", "HTTP proxy on this Unix socket (empty: direct)")
	conns := fs.Int("conns", 500, "concurrent connections")
	n := fs.Int("n", 10, "sequential requests per connection")
	rate := fs.Int("rate", 0, "requests per second over all connections (0: each as soon as the last is answered)")
	hold := fs.Duration("hold", 300*time.Millisecond, "keep the connections open this long after the last request")
	if err := fs.Parse(args); err != nil || *target == "" || *conns < 1 || *conns > 5000 || *n < 1 || *n > 10000 || *rate < 0 {
		fmt.Fprintln(os.Stderr, "usage: load -url URL [-sock SOCK] [-conns C] [-n N] [-rate R] [-hold D]")
		return 2
	}
	var (
		mu  sync.Mutex
		res loadResult
		wg  sync.WaitGroup
	)
	gate := make(chan struct{})
	trs := make([]*http.Transport, *conns)
	for i := range trs {
		trs[i] = loadTransport(*sock)
	}
	var start time.Time
	for i := range *conns {
		c := &http.Client{Transport: trs[i], Timeout: time.Minute}
		at := func(k int) time.Time { return time.Now() }
		if *rate > 0 {
			interval := time.Duration(*conns) * time.Second / time.Duration(*rate)
			at = func(k int) time.Time {
				return start.Add(interval*time.Duration(i)/time.Duration(*conns) + interval*time.Duration(k))
			}
		}
		wg.Go(func() {
			<-gate
			cr := loadClient(c, *target, *n, at)
			mu.Lock()
			defer mu.Unlock()
			res.add(cr)
		})
	}
	start = time.Now()
	close(gate)
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	time.Sleep(*hold)
	for _, tr := range trs {
		tr.CloseIdleConnections()
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// loadTransport is one client's transport: one connection, kept alive,
// to the proxy on sock or (sock "") to the host.
func loadTransport(sock string) *http.Transport {
	tr := &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true, IdleConnTimeout: time.Minute}
	if sock != "" {
		tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: "egress-proxy"})
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
	}
	return tr
}

// clientResult is one load client's requests.
type clientResult struct {
	lat         []int64
	errs, bytes int64
	firstErr    string
}

func (r *loadResult) add(c clientResult) {
	r.Requests += int64(len(c.lat))
	r.Errors += c.errs
	r.Bytes += c.bytes
	r.LatNS = append(r.LatNS, c.lat...)
	if r.FirstErr == "" {
		r.FirstErr = c.firstErr
	}
}

// loadClient makes n sequential GETs of target with c, the k-th not
// before at(k); each latency counts from at(k).
func loadClient(c *http.Client, target string, n int, at func(k int) time.Time) clientResult {
	var r clientResult
	r.lat = make([]int64, 0, n)
	for k := range n {
		t := at(k)
		time.Sleep(time.Until(t))
		resp, err := c.Get(target)
		if err == nil {
			var m int64
			m, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			r.bytes += m
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %s", resp.Status)
			}
		}
		if err != nil {
			r.errs++
			if r.firstErr == "" {
				r.firstErr = err.Error()
			}
			continue
		}
		r.lat = append(r.lat, int64(time.Since(t)))
	}
	return r
}

// loadPath is one way the load clients reach the test host.
type loadPath struct {
	name string
	args []string // the load mode's arguments
	pid  int      // the proxy process, sampled while it runs (0: none)
}

// loadPaths are the four paths of section 5: full speed and paced (pace
// requests per second), straight to h and through the proxy on sock,
// whose process pid is sampled.
func loadPaths(h *testHost, sock string, pid, conns, perConn, pace int) []loadPath {
	return []loadPath{
		{lDirect, loadArgs(h, conns, perConn), 0},
		{lProxy, loadArgs(h, conns, perConn, "-sock", sock), pid},
		{lDirectPaced, loadArgs(h, conns, perConn, "-rate", fmt.Sprint(pace)), 0},
		{lProxyPaced, loadArgs(h, conns, perConn, "-rate", fmt.Sprint(pace), "-sock", sock), pid},
	}
}

// relayPath is the full-speed load through the bare relay on sock (the
// relay mode, process pid): the floor of any relay, beside lProxy.
func relayPath(h *testHost, sock string, pid, conns, perConn int) loadPath {
	return loadPath{lRelay, loadArgs(h, conns, perConn, "-sock", sock), pid}
}

// loadArgs is the load mode's command line against h, then extra.
func loadArgs(h *testHost, conns, perConn int, extra ...string) []string {
	return append([]string{"load", "-url", h.url("/ok"), "-conns", fmt.Sprint(conns), "-n", fmt.Sprint(perConn), "-hold", "400ms"}, extra...)
}

// runLoads runs every path against h rounds times, interleaved (the order rotates
// each round); a path that failed is not run again. Bounded by rounds and,
// between rounds, by deadline.
func (e *env) runLoads(h *testHost, paths []loadPath, rounds int, deadline time.Time) (map[string][]loadRun, map[string]error) {
	runs, failed := map[string][]loadRun{}, map[string]error{}
	for r := range rounds {
		if r > 0 && time.Now().After(deadline) {
			break
		}
		for k := range paths {
			p := paths[(k+r)%len(paths)]
			if failed[p.name] != nil {
				continue
			}
			var stop func() procSample
			var cpu0 time.Duration
			if p.pid > 0 {
				cpu0, _ = procCPU(p.pid)
				stop = sampler(p.pid, nil)
			}
			lr, err := e.runLoad(h, p.args)
			if stop != nil {
				lr.peak = stop()
				if cpu1, ok := procCPU(p.pid); ok {
					lr.proxyCPU = cpu1 - cpu0
				}
			}
			if err != nil {
				failed[p.name] = err
				fmt.Fprintf(os.Stderr, "bench: scale: %s: %v\n", p.name, err)
				continue
			}
			runs[p.name] = append(runs[p.name], lr)
		}
	}
	return runs, failed
}

// loadTable reports the four load paths, and the ratio and p99 the goals
// read.
func (r *report) loadTable(w func(string, ...any)) {
	s := r.scale
	w("This program's `load` mode opens %d connections at once, each with its own HTTP client, and makes %d sequential `GET /ok` "+
		"on each (%d requests per run): through `sandbox-run proxy` on its Unix socket, and, interleaved, straight to the test host "+
		"(no proxy): the same clients, the same host. At full speed each client sends its next request when the last is answered, "+
		"so the rate is what the path carries and the latency is mostly queueing (%d requests in flight at once); paced, the %d clients "+
		"send %d requests per second in all, evenly spread, and each latency counts from the moment its request was due, so a stall is "+
		"not hidden. All connections stay open 400 ms after the last answer, then close. The proxy process is sampled every 25 ms "+
		"from /proc/PID/status (VmRSS, VmHWM, Threads) and /proc/PID/fd; on this machine the clients, the proxy and the test host share "+
		"%d cores.\n\n", s.conns, s.perConn, s.conns*s.perConn, s.conns, s.conns, s.rate, r.info.cores)
	w("| path | runs | requests/s (median) | p50 | p99 | max | connections the test host accepted per run |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, name := range []string{lDirect, lProxy, lRelay, lDirectPaced, lProxyPaced} {
		runs := s.loads[name]
		if len(runs) == 0 {
			if err := s.loadErr[name]; err != nil {
				w("| %s | failed: %s | | | | | |\n", name, oneLine(err.Error()))
			}
			continue
		}
		lat := pooled(runs)
		w("| %s | %d | %.0f | %s | %s | %s | %.0f |\n", name, len(runs), rate(runs), ms(lat.quantile(0.5)), ms(lat.quantile(0.99)), ms(lat.max()), medianUpstream(runs))
	}
	w("\n")
	if d, p := s.loads[lDirect], s.loads[lProxy]; len(d) > 0 && len(p) > 0 {
		w("At full speed the load runs through the node-wide proxy at **%s** the request rate with no proxy (goal: at least %.1fx), p99 %s against %s. ",
			fx(rate(p), rate(d)), loadGoalRatio, ms(pooled(p).quantile(0.99)), ms(pooled(d).quantile(0.99)))
	}
	if d, rl := s.loads[lDirect], s.loads[lRelay]; len(d) > 0 && len(rl) > 0 {
		w("A bare relay on a Unix socket (accept, dial, splice both ways; no HTTP, no pool) carries %s: the most a relaying path "+
			"gets on these cores. ", fx(rate(rl), rate(d)))
	}
	if d, p := s.loads[lDirectPaced], s.loads[lProxyPaced]; len(d) > 0 && len(p) > 0 {
		w("Paced at %d requests per second, p99 is **%s** through the proxy (goal: at most %s) against %s with no proxy.",
			s.rate, ms(pooled(p).quantile(0.99)), ms(loadGoalP99), ms(pooled(d).quantile(0.99)))
	}
	w("\n\n")
}

// loadGoals are the summary rows of the node-wide proxy under load: the
// full-speed ratio and the paced p99 against their goals.
func (r *report) loadGoals() [][3]string {
	s := r.scale
	var rows [][3]string
	full := fmt.Sprintf("scale: node-wide proxy, %d connections at full speed, ≥ %.1fx the same clients with no proxy", s.conns, loadGoalRatio)
	if d, p := s.loads[lDirect], s.loads[lProxy]; len(d) > 0 && len(p) > 0 {
		x := rate(p) / rate(d)
		peak := procSample{}
		for _, lr := range p {
			peak = peak.max(lr.peak)
		}
		rows = append(rows, [3]string{full,
			fmt.Sprintf("%.2fx (%.0f vs %.0f req/s, medians of %d runs); p99 %s vs %s; peak RSS %s, fds %d", x, rate(p), rate(d), len(p),
				ms(pooled(p).quantile(0.99)), ms(pooled(d).quantile(0.99)), mib(peak.hwmKB), peak.fds),
			verdict(x >= loadGoalRatio, fmt.Sprintf("by %.2fx", loadGoalRatio-x))})
	} else if err := s.loadErr[lProxy]; err != nil {
		rows = append(rows, [3]string{full, "failed: " + oneLine(err.Error()), "**missed**"})
	}
	if d, rl := s.loads[lDirect], s.loads[lRelay]; len(d) > 0 && len(rl) > 0 {
		rows = append(rows, [3]string{fmt.Sprintf("scale: the floor, a bare splice relay, %d connections at full speed, against no proxy (reported)", s.conns),
			fmt.Sprintf("%.2fx (medians of %d runs)", rate(rl)/rate(d), len(rl)), "measured"})
	}
	paced := fmt.Sprintf("scale: node-wide proxy, %d connections paced at %d req/s, p99 ≤ %s", s.conns, s.rate, ms(loadGoalP99))
	if d, p := s.loads[lDirectPaced], s.loads[lProxyPaced]; len(d) > 0 && len(p) > 0 {
		p99 := pooled(p).quantile(0.99)
		rows = append(rows, [3]string{paced, fmt.Sprintf("p99 %s (no proxy: %s), %d runs", ms(p99), ms(pooled(d).quantile(0.99)), len(p)),
			verdict(p99 <= loadGoalP99, fmt.Sprintf("by %s", ms(p99-loadGoalP99)))})
	} else if err := s.loadErr[lProxyPaced]; err != nil {
		rows = append(rows, [3]string{paced, "failed: " + oneLine(err.Error()), "**missed**"})
	}
	return rows
}

// proxyLoadMain is the mode `proxy-load -bin BIN [-before BIN0] [-rounds
// N] [-conns C] [-n N] [-rate R]`: section 5's four load paths alone
// (make bench runs them in full), and with -before the same two proxied
// paths through `BIN0 proxy` too, in the same interleaved rounds: a
// before/after comparison of two builds. Prints a table; writes nothing.
func proxyLoadMain(args []string) int {
	fs := flag.NewFlagSet("proxy-load", flag.ContinueOnError)
	bin := fs.String("bin", "bin/sandbox-run", "sandbox-run binary")
	before := fs.String("before", "", "another sandbox-run binary, measured in the same rounds")
	rounds := fs.Int("rounds", 8, "runs per path")
	conns := fs.Int("conns", 500, "concurrent connections")
	perConn := fs.Int("n", 10, "sequential requests per connection")
	pace := fs.Int("rate", 1000, "requests per second of the paced paths")
	if err := fs.Parse(args); err != nil || *rounds < 1 || *rounds > 1000 {
		return 2
	}
	e, err := setup(*bin)
	if err == nil {
		var h *testHost
		if h, err = newTestHost(e.exe); err == nil {
			atExit(h.close)
			return e.proxyLoad(h, *before, *rounds, *conns, *perConn, *pace)
		}
	}
	fmt.Fprintln(os.Stderr, "bench: proxy-load:", err)
	return 1
}

func (e *env) proxyLoad(h *testHost, before string, rounds, conns, perConn, pace int) int {
	np, err := startNodeProxy(e.bin, e.base+"/nodeproxy", h.addr.String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: proxy-load:", err)
		return 1
	}
	atExit(np.close)
	paths := loadPaths(h, np.sock, np.cmd.Process.Pid, conns, perConn, pace)
	rl, err := startRelay(e.exe, e.base+"/relay.sock", h.addr.String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: proxy-load: relay:", err)
		return 1
	}
	atExit(rl.close)
	paths = append(paths, relayPath(h, e.base+"/relay.sock", rl.cmd.Process.Pid, conns, perConn))
	if before != "" {
		old, err := startNodeProxy(before, e.base+"/nodeproxy-before", h.addr.String())
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: proxy-load: -before:", err)
			return 1
		}
		atExit(old.close)
		for _, p := range loadPaths(h, old.sock, old.cmd.Process.Pid, conns, perConn, pace) {
			if p.name == lProxy || p.name == lProxyPaced {
				p.name += " (-before)"
				paths = append(paths, p)
			}
		}
	}
	runs, failed := e.runLoads(h, paths, rounds, time.Now().Add(time.Hour))
	fmt.Printf("%d connections x %d requests; paced: %d/s; %d rounds, interleaved\n\n", conns, perConn, pace, rounds)
	fmt.Printf("| path | runs | requests/s (median) | vs no proxy | p50 | p99 | max | upstream connections per run | CPU µs per request: proxy, clients (medians) |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range paths {
		rs := runs[p.name]
		if len(rs) == 0 {
			fmt.Printf("| %s | failed: %v | | | | | | | |\n", p.name, failed[p.name])
			continue
		}
		base := runs[lDirect]
		if p.name == lDirectPaced || p.name == lProxyPaced || p.name == lProxyPaced+" (-before)" {
			base = runs[lDirectPaced]
		}
		lat := pooled(rs)
		cpu := fmt.Sprintf("%.0f", medianCPUPerRequest(rs, false))
		if p.pid > 0 {
			cpu = fmt.Sprintf("%.0f, %s", medianCPUPerRequest(rs, true), cpu)
		}
		fmt.Printf("| %s | %d | %.0f | %s | %s | %s | %s | %.0f | %s |\n", p.name, len(rs), rate(rs), fx(rate(rs), rate(base)),
			ms(lat.quantile(0.5)), ms(lat.quantile(0.99)), ms(lat.max()), medianUpstream(rs), cpu)
	}
	return 0
}
