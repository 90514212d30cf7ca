//go:build linux

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// nTransparent is the variant whose client ignores the proxy variables:
// its connections go through the sandbox's TUN device and the host
// side's netstack (transparent egress).
const nTransparent = "sandbox-run transparent (TUN + netstack, no proxy variables)"

// transparentVariant runs the same fetch client inside sandbox-run with
// -noproxy, so it connects to the test host itself.
func (e *env) transparentVariant(h *testHost) netVariant {
	return transparentWith(e, h, nTransparent, e.bin)
}

// transparentWith is transparentVariant with another sandbox-run binary
// (-baseline-bin: before and after a change in one interleaved run).
func transparentWith(e *env, h *testHost, name, bin string) netVariant {
	return netVariant{name, func(ctx context.Context, a []string) *exec.Cmd {
		args := []string{"run", "--workdir", e.work, "--read", e.binDir, "--allow-host", h.addr.String(), "--", e.exe, "fetch", "-noproxy"}
		return exec.CommandContext(ctx, bin, append(args, a...)...)
	}}
}

// nBaseline names transparent egress by a -baseline-bin binary.
const nBaseline = "transparent, baseline binary"

// dialMain is the hidden mode `dial -addr HOST:PORT -n N`: N sequential
// TCP connects (each closed at once), the time of each to stdout as one
// JSON line (fetchResult.LatNS). Through the netstack a connect completes
// only once the host side has judged it and connected upstream, so this
// is the connection set-up a client sees.
func dialMain(args []string) int {
	fs := flag.NewFlagSet("dial", flag.ContinueOnError)
	addr := fs.String("addr", "", "HOST:PORT")
	n := fs.Int("n", 1, "sequential connects")
	if err := fs.Parse(args); err != nil || *addr == "" || *n < 1 || *n > 100000 {
		fmt.Fprintln(os.Stderr, "usage: dial -addr HOST:PORT [-n N]")
		return 2
	}
	var res fetchResult
	start := time.Now()
	for i := 0; i < *n; i++ {
		t := time.Now()
		c, err := net.DialTimeout("tcp", *addr, 10*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		res.LatNS = append(res.LatNS, int64(time.Since(t)))
		c.Close()
	}
	res.Seconds = time.Since(start).Seconds()
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// measureConnect runs rounds of n connects to the test host, direct and
// through transparent egress (and by each of bins, named by names),
// interleaved; the pooled times per variant.
func (e *env) measureConnect(h *testHost, rounds, n int, deadline time.Time, bins ...[2]string) (map[string]sample, map[string]error) {
	dial := []string{"-addr", h.addr.String(), "-n", fmt.Sprint(n)}
	vs := []netVariant{
		{nDirect, func(ctx context.Context, a []string) *exec.Cmd {
			return exec.CommandContext(ctx, e.exe, append([]string{"dial"}, a...)...)
		}},
		dialVariant(e, h, nTransparent, e.bin),
	}
	for _, b := range bins {
		vs = append(vs, dialVariant(e, h, b[0], b[1]))
	}
	out, failed := map[string]sample{}, map[string]error{}
	for r := 0; r < rounds; r++ {
		if r > 0 && time.Now().After(deadline) {
			break
		}
		for k := range vs {
			v := vs[(k+r)%len(vs)]
			if failed[v.name] != nil {
				continue
			}
			fr, err := netRun(v, dial, 2*time.Minute)
			if err != nil {
				failed[v.name] = fmt.Errorf("connect: %w", err)
				fmt.Fprintf(os.Stderr, "bench: %s: %v\n", v.name, failed[v.name])
				continue
			}
			for _, ns := range fr.LatNS {
				out[v.name] = append(out[v.name], time.Duration(ns))
			}
		}
	}
	return out, failed
}

// dialVariant runs `dial` inside bin's sandbox with transparent egress.
func dialVariant(e *env, h *testHost, name, bin string) netVariant {
	return netVariant{name, func(ctx context.Context, a []string) *exec.Cmd {
		args := []string{"run", "--workdir", e.work, "--read", e.binDir, "--allow-host", h.addr.String(), "--", e.exe, "dial"}
		return exec.CommandContext(ctx, bin, append(args, a...)...)
	}}
}

// transparentGoals are the summary rows of transparent egress: the
// download against a direct connection by the same client, unconfined
// (issue 36's straight-through; goal ≥ 0.9x), and the
// connection set-up added over a direct connect (reported, no goal).
func (r *report) transparentGoals() [][3]string {
	n := r.net
	if n == nil {
		return nil
	}
	var rows [][3]string
	if tr, d := median(n.throughput[nTransparent]), median(n.throughput[nDirect]); tr > 0 && d > 0 {
		x := tr / d
		rows = append(rows, [3]string{"egress: transparent (netstack) ≥ 0.9x straight through (a direct connection)", fmt.Sprintf("%.2fx", x),
			verdict(x >= 0.9, fmt.Sprintf("by %.2fx", 0.9-x))})
	}
	if p, d := median(n.throughput[nProxy]), median(n.throughput[nDirect]); p > 0 && d > 0 {
		x := p / d
		rows = append(rows, [3]string{"egress: proxy ≥ 0.9x straight through (a direct connection)", fmt.Sprintf("%.2fx", x),
			verdict(x >= 0.9, fmt.Sprintf("by %.2fx", 0.9-x))})
	}
	if rl, d := median(n.throughput[nRelay]), median(n.throughput[nDirect]); rl > 0 && d > 0 {
		rows = append(rows, [3]string{"egress: the floor, a bare splice relay, against a direct connection (reported)",
			fmt.Sprintf("%.2fx", rl/d), "measured"})
	}
	if d, s := r.connect[nDirect], r.connect[nTransparent]; len(d) > 0 && len(s) > 0 {
		rows = append(rows, [3]string{"connect: set-up through the netstack, p50 added over direct (reported)",
			us(s.quantile(0.5) - d.quantile(0.5)), "measured"})
	}
	return rows
}

// connectSection reports the connection set-up times.
func (r *report) connectSection(w func(string, ...any)) {
	w("## 4b. Connection set-up through transparent egress\n\n")
	if len(r.connect) == 0 && len(r.connectFailed) == 0 {
		w("Not measured.\n\n")
		return
	}
	w("Sequential TCP connects (each closed at once) to the test host by the same client (`dial` mode), direct and from inside "+
		"`sandbox-run run --allow-host HOST:PORT` with no proxy: through the TUN device, the host side's netstack, the policy's "+
		"judgement of the exact address and the upstream connect, which completes before the sandbox's handshake does. "+
		"%d connects per path, in interleaved batches.\n\n", len(r.connect[nTransparent]))
	w("| path | p50 | p99 | max | p50 added over direct |\n|---|---:|---:|---:|---:|\n")
	d := r.connect[nDirect]
	for _, name := range []string{nDirect, nTransparent} {
		t := r.connect[name]
		if len(t) == 0 {
			if err := r.connectFailed[name]; err != nil {
				w("| %s | failed: %s | | | |\n", name, oneLine(err.Error()))
			}
			continue
		}
		w("| %s | %s | %s | %s | %s |\n", name, us(t.quantile(0.5)), us(t.quantile(0.99)), us(t.max()), us(t.quantile(0.5)-d.quantile(0.5)))
	}
	w("\n")
}

// transparentMain is the mode `transparent` (make bench-transparent):
// transparent egress alone, against a direct connection and straight
// through the proxy, and against other sandbox-run binaries
// (-baseline-bin) in the same rounds. Prints, writes nothing.
func transparentMain(args []string) int {
	fs := flag.NewFlagSet("transparent", flag.ContinueOnError)
	bin := fs.String("bin", "bin/sandbox-run", "sandbox-run binary")
	baseline := fs.String("baseline-bin", "", "other sandbox-run binaries, comma-separated, measured in the same rounds (before and after)")
	rounds := fs.Int("n", 15, "downloads per variant, interleaved")
	size := fs.Int64("size", 256<<20, "download size in bytes")
	connects := fs.Int("connects", 250, "connects per path per batch (4 batches)")
	maxTime := fs.Duration("max-time", 20*time.Minute, "time bound (checked between rounds)")
	if err := fs.Parse(args); err != nil || *rounds < 1 || *connects < 1 {
		return 2
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		runCleanups()
		os.Exit(130)
	}()
	defer runCleanups()
	e, err := setup(*bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: setup:", err)
		return 1
	}
	return transparentOnlyMain(e, *baseline, *size, *rounds, *connects, time.Now().Add(*maxTime))
}

// transparentOnlyMain is the mode's measurement: the download (rounds of
// size bytes) and the connection set-up (4 batches of connects of n
// each), direct, straight through the proxy and through transparent
// egress, interleaved; prints medians and the ratios to direct, writes
// nothing.
func transparentOnlyMain(e *env, baseline string, size int64, rounds, connects int, deadline time.Time) int {
	h, err := newTestHost(e.exe)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: test host:", err)
		return 1
	}
	atExit(h.close)
	p, err := startTCPProxy(e.exe, h.addr.String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	atExit(p.close)
	rl, err := startRelay(e.exe, "tcp", h.addr.String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	atExit(rl.close)
	vs := pickNet(append(e.netVariants(h, p, nil), e.transparentVariant(h), e.relayVariant(rl)), nDirect, nProxy, nTransparent, nRelay)
	var bins [][2]string
	for i, b := range strings.Split(baseline, ",") {
		if b != "" {
			bins = append(bins, [2]string{fmt.Sprintf("%s %d: %s", nBaseline, i, b), b})
			vs = append(vs, transparentWith(e, h, bins[len(bins)-1][0], b))
		}
	}
	fmt.Fprintf(os.Stderr, "bench: transparent: %d rounds of a %d MiB download, %d connects per path\n", rounds, size>>20, 4*connects)
	res := measureNet(vs, h, size, rounds, 0, 0, deadline)
	conn, cfail := e.measureConnect(h, 4, connects, deadline, bins...)
	if len(res.failed) > 0 || len(cfail) > 0 {
		return 1
	}
	direct := median(res.throughput[nDirect])
	fmt.Printf("%-72s %12s %12s %12s %8s %10s  (n=%d, interleaved)\n", "download", "median MiB/s", "min", "max", "/direct", "CPU s/GiB", rounds)
	for _, v := range vs {
		t := res.throughput[v.name]
		fmt.Printf("%-72s %12.0f %12.0f %12.0f %7.2fx %10.2f\n", v.name, median(t), slices.Min(t), slices.Max(t), median(t)/direct, median(res.cpuPerGiB[v.name]))
	}
	fmt.Println("(CPU s/GiB: median CPU time of the variant's process tree per GiB: the client's, and sandbox-run's for transparent egress;\n" +
		" the test host's and the straight-through proxy's not counted. On a loaded machine it moves less than the throughput.)")
	fmt.Printf("%-72s %12s %12s %12s\n", "connection set-up", "p50", "p99", "max")
	for _, name := range append([]string{nDirect, nTransparent}, names(bins)...) {
		t := conn[name]
		fmt.Printf("%-72s %12s %12s %12s\n", name, us(t.quantile(0.5)), us(t.quantile(0.99)), us(t.max()))
	}
	fmt.Printf("transparent / direct (download medians): %.2fx (goal >= 0.9x); transparent / proxy: %.2fx\n",
		median(res.throughput[nTransparent])/direct, median(res.throughput[nTransparent])/median(res.throughput[nProxy]))
	fmt.Printf("bare relay / direct (download medians): %.2fx: no path that relays through another process reaches more here\n",
		median(res.throughput[nRelay])/direct)
	for _, v := range vs[4:] {
		fmt.Printf("transparent / %s (download medians): %.2fx\n", v.name, median(res.throughput[nTransparent])/median(res.throughput[v.name]))
	}
	for _, b := range bins {
		fmt.Printf("set-up p50, transparent / %s: %s\n", b[0], ratio(conn[nTransparent].quantile(0.5), conn[b[0]].quantile(0.5)))
	}
	fmt.Printf("set-up p50 added over direct: %s (%s)\n", us(conn[nTransparent].quantile(0.5)-conn[nDirect].quantile(0.5)),
		ratio(conn[nTransparent].quantile(0.5), conn[nDirect].quantile(0.5)))
	return 0
}

// names are the first of each pair.
func names(bins [][2]string) []string {
	var out []string
	for _, b := range bins {
		out = append(out, b[0])
	}
	return out
}

// pickNet keeps the variants named, in that order.
func pickNet(vs []netVariant, names ...string) []netVariant {
	var out []netVariant
	for _, n := range names {
		for _, v := range vs {
			if v.name == n {
				out = append(out, v)
			}
		}
	}
	return out
}
