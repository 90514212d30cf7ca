//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/proxy"
)

// serveMain is the hidden mode `serve ADDR`: the test host's HTTP server,
// run inside its network namespace. /ok is a small answer, /bytes?n=N a
// download of N bytes, /count the connections accepted so far. It prints "ready" once listening and exits when
// stdin closes.
func serveMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: serve ADDR")
		return 2
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var conns atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok from test host") })
	mux.HandleFunc("/bytes", sandboxtest.ServeBytes)
	mux.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, conns.Load()) })
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	fmt.Println("ready")
	_ = (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}}).Serve(ln)
	return 1
}

// proxyMain is the hidden mode `proxy-tcp ALLOW...`: sandbox-run's egress
// proxy (the same package `sandbox-run run` starts) on a loopback TCP
// port, for the straight-through measurement. It prints the address and
// serves until stdin closes.
func proxyMain(args []string) int {
	p, err := proxy.New(proxy.Config{Allow: args})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	fmt.Println(ln.Addr())
	if err := p.Serve(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// fetchResult is what `fetch` prints: bytes received, the seconds the
// requests took (from the first request to the last body's end) and each
// request's latency.
type fetchResult struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	LatNS   []int64 `json:"lat_ns"`
	// CPU is not fetch's own: netRun fills it with the CPU time of the
	// variant's process tree (the command it started and every
	// descendant waited for: for transparent egress, sandbox-run and the
	// client inside; the test host and a separate proxy not counted).
	CPU time.Duration `json:"-"`
}

// fetchMain is the hidden mode `fetch -url URL -n N`: N sequential GETs
// through the proxy the environment names (HTTP_PROXY), reading every body
// to the end; the result goes to stdout as one JSON line. It is the same
// client everywhere (unconfined, in sandbox-run, in srt), so only the path
// differs.
func fetchMain(args []string) int {
	fs := flag.NewFlagSet("fetch", flag.ContinueOnError)
	url := fs.String("url", "", "URL")
	n := fs.Int("n", 1, "sequential requests")
	noproxy := fs.Bool("noproxy", false, "ignore the proxy variables: connect to the host itself")
	if err := fs.Parse(args); err != nil || *url == "" || *n < 1 || *n > 100000 {
		fmt.Fprintln(os.Stderr, "usage: fetch -url URL [-n N]")
		return 2
	}
	c := &http.Client{
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 1},
		Timeout:   5 * time.Minute,
	}
	if *noproxy {
		c.Transport.(*http.Transport).Proxy = nil
	}
	var res fetchResult
	buf := make([]byte, 256<<10)
	start := time.Now()
	for i := 0; i < *n; i++ {
		t := time.Now()
		resp, err := c.Get(*url)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		k, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			fmt.Fprintf(os.Stderr, "GET %s: %s: %v\n", *url, resp.Status, err)
			return 1
		}
		res.Bytes += k
		res.LatNS = append(res.LatNS, int64(time.Since(t)))
	}
	res.Seconds = time.Since(start).Seconds()
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// testHost is the benchmark's own HTTP server in a network namespace,
// reached over a veth pair; close removes everything.
type testHost struct {
	ns, veth string
	addr     netip.AddrPort
	server   *exec.Cmd
	stdin    io.WriteCloser
}

// newTestHost needs root and iproute2. Names derive from the pid; the
// addresses come from 198.19.128.0/17 (benchmarking space).
func newTestHost(exe string) (*testHost, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root (network namespaces)")
	}
	pid := os.Getpid()
	h := &testHost{ns: fmt.Sprintf("sbx-bench-%d", pid), veth: fmt.Sprintf("sbxb%da", pid%100000)}
	peer := fmt.Sprintf("sbxb%db", pid%100000)
	block := uint32(pid % 8192)
	base := uint32(198)<<24 | uint32(19)<<16 | 1<<15 | block<<2
	v4 := func(n uint32) netip.Addr {
		return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	}
	outside, inside := v4(base+1), v4(base+2)
	h.addr = netip.AddrPortFrom(inside, 8080)
	h.cleanupLinks()
	if err := ip("netns", "add", h.ns); err != nil {
		return nil, err
	}
	for _, a := range [][]string{
		{"link", "add", h.veth, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", h.ns},
		{"addr", "add", outside.String() + "/30", "dev", h.veth},
		{"link", "set", h.veth, "up"},
		{"netns", "exec", h.ns, "ip", "addr", "add", inside.String() + "/30", "dev", peer},
		{"netns", "exec", h.ns, "ip", "link", "set", peer, "up"},
		{"netns", "exec", h.ns, "ip", "link", "set", "lo", "up"},
	} {
		if err := ip(a...); err != nil {
			h.close()
			return nil, err
		}
	}
	h.server = exec.Command("ip", "netns", "exec", h.ns, exe, "serve", h.addr.String())
	h.server.Stderr = os.Stderr
	h.server.WaitDelay = 5 * time.Second
	var err error
	if h.stdin, err = h.server.StdinPipe(); err != nil {
		h.close()
		return nil, err
	}
	out, err := h.server.StdoutPipe()
	if err != nil {
		h.close()
		return nil, err
	}
	if err := h.server.Start(); err != nil {
		h.close()
		return nil, err
	}
	if err := waitLine(out, 20*time.Second, func(l string) bool { return l == "ready" }); err != nil {
		h.close()
		return nil, fmt.Errorf("test host: %w", err)
	}
	return h, nil
}

func (h *testHost) url(path string) string { return "http://" + h.addr.String() + path }

// close stops the server and removes the namespace and the veth pair. It
// may be called more than once.
func (h *testHost) close() {
	if h.server != nil && h.server.Process != nil {
		h.stdin.Close()
		done := make(chan struct{})
		go func() { _ = h.server.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = h.server.Process.Kill()
			<-done
		}
		h.server = nil
	}
	h.cleanupLinks()
}

func (h *testHost) cleanupLinks() {
	_ = ip("link", "del", h.veth)
	_ = ip("netns", "del", h.ns)
}

func ip(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// waitLine reads lines from r until ok accepts one, for at most d.
func waitLine(r io.Reader, d time.Duration, ok func(string) bool) error {
	got := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if ok(sc.Text()) {
				got <- nil
				go func() { _, _ = io.Copy(io.Discard, r) }()
				return
			}
		}
		got <- fmt.Errorf("ended without the expected line: %v", sc.Err())
	}()
	select {
	case err := <-got:
		return err
	case <-time.After(d):
		return fmt.Errorf("no answer after %s", d)
	}
}

// tcpProxy is proxy-tcp running as a child process.
type tcpProxy struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

func startTCPProxy(exe string, allow ...string) (*tcpProxy, error) {
	return startLineChild(exe, append([]string{"proxy-tcp"}, allow...)...)
}

// startLineChild starts exe with args, a mode that prints the address it
// listens on as its first line and serves until its stdin closes.
func startLineChild(exe string, args ...string) (*tcpProxy, error) {
	p := &tcpProxy{cmd: exec.Command(exe, args...)}
	p.cmd.Stderr = os.Stderr
	p.cmd.WaitDelay = 5 * time.Second
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	if err := waitLine(out, 10*time.Second, func(l string) bool { p.addr = l; return true }); err != nil {
		p.close()
		return nil, fmt.Errorf("%s: %w", args[0], err)
	}
	return p, nil
}

func (p *tcpProxy) close() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// Names of the network variants.
const (
	nDirect  = "no proxy (direct)"
	nProxy   = "proxy over TCP (straight through)"
	nSandbox = "sandbox-run (forwarder + proxy)"
	nSRT     = "srt (its proxy)"
)

// netVariant runs `fetch` on some path and returns its result.
type netVariant struct {
	name string
	cmd  func(ctx context.Context, fetchArgs []string) *exec.Cmd
}

func (e *env) netVariants(h *testHost, p *tcpProxy, srt *srtEnv) []netVariant {
	clean := envWithout(os.Environ(), "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
	vs := []netVariant{
		{nDirect, func(ctx context.Context, a []string) *exec.Cmd {
			c := exec.CommandContext(ctx, e.exe, append([]string{"fetch"}, a...)...)
			c.Env = clean
			return c
		}},
		{nProxy, func(ctx context.Context, a []string) *exec.Cmd {
			c := exec.CommandContext(ctx, e.exe, append([]string{"fetch"}, a...)...)
			c.Env = append(clean, "HTTP_PROXY=http://"+p.addr)
			return c
		}},
		{nSandbox, func(ctx context.Context, a []string) *exec.Cmd {
			args := []string{"run", "--workdir", e.work, "--read", e.binDir, "--allow-host", h.addr.String(), "--", e.exe, "fetch"}
			return exec.CommandContext(ctx, e.bin, append(args, a...)...)
		}},
	}
	if srt != nil && srt.settingsHost != "" {
		vs = append(vs, netVariant{nSRT, func(ctx context.Context, a []string) *exec.Cmd {
			v := srt.run(srt.settingsHost, e.srtWork, append([]string{e.exe, "fetch"}, a...)...)
			c, _ := v.cmd(ctx)
			return c
		}})
	}
	return vs
}

// netRun runs one fetch and parses its result.
func netRun(v netVariant, fetchArgs []string, timeout time.Duration) (fetchResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := v.cmd(ctx, fetchArgs)
	var out, stderr bytes.Buffer
	c.Stdout, c.Stderr = &out, &stderr
	c.WaitDelay = 5 * time.Second
	if err := c.Run(); err != nil {
		return fetchResult{}, fmt.Errorf("%v: %s", err, lastLines(stderr.String(), 5))
	}
	var r fetchResult
	line := bytes.TrimSpace(out.Bytes())
	if i := bytes.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return fetchResult{}, fmt.Errorf("fetch output %q: %v (stderr: %s)", out.String(), err, lastLines(stderr.String(), 5))
	}
	r.CPU = c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	return r, nil
}

// netResults holds, per variant, the throughput of each download (MiB/s)
// and the pooled request latencies.
type netResults struct {
	size       int64
	throughput map[string][]float64
	cpuPerGiB  map[string][]float64 // CPU seconds of the process tree per GiB (fetchResult.CPU)
	latency    map[string]sample
	failed     map[string]error
}

// measureNet runs the downloads (rounds of size bytes) and then the
// latency batches (latRounds of latN requests), each interleaved across
// the variants; every fetch is bounded by a timeout, the whole by the
// deadline (checked between rounds).
func measureNet(vs []netVariant, h *testHost, size int64, rounds, latRounds, latN int, deadline time.Time) netResults {
	res := netResults{size: size, throughput: map[string][]float64{}, cpuPerGiB: map[string][]float64{}, latency: map[string]sample{}, failed: map[string]error{}}
	dl := []string{"-url", h.url(fmt.Sprintf("/bytes?n=%d", size))}
	for r := 0; r < rounds; r++ {
		if r > 0 && time.Now().After(deadline) {
			break
		}
		for k := range vs {
			v := vs[(k+r)%len(vs)]
			if res.failed[v.name] != nil {
				continue
			}
			fr, err := netRun(v, dl, 3*time.Minute)
			if err == nil && fr.Bytes != size {
				err = fmt.Errorf("got %d bytes, want %d", fr.Bytes, size)
			}
			if err != nil {
				res.failed[v.name] = fmt.Errorf("download: %w", err)
				fmt.Fprintf(os.Stderr, "bench: %s: %v\n", v.name, res.failed[v.name])
				continue
			}
			res.throughput[v.name] = append(res.throughput[v.name], float64(fr.Bytes)/(1<<20)/fr.Seconds)
			res.cpuPerGiB[v.name] = append(res.cpuPerGiB[v.name], fr.CPU.Seconds()/(float64(fr.Bytes)/(1<<30)))
		}
	}
	lat := []string{"-url", h.url("/ok"), "-n", fmt.Sprint(latN)}
	for r := 0; r < latRounds; r++ {
		if r > 0 && time.Now().After(deadline) {
			break
		}
		for k := range vs {
			v := vs[(k+r)%len(vs)]
			if res.failed[v.name] != nil {
				continue
			}
			fr, err := netRun(v, lat, 2*time.Minute)
			if err != nil {
				res.failed[v.name] = fmt.Errorf("latency: %w", err)
				fmt.Fprintf(os.Stderr, "bench: %s: %v\n", v.name, res.failed[v.name])
				continue
			}
			for _, ns := range fr.LatNS {
				res.latency[v.name] = append(res.latency[v.name], time.Duration(ns))
			}
		}
	}
	return res
}
