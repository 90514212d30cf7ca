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
	"time"
)

// nTransparent is the variant whose client ignores the proxy variables:
// its connections go through the sandbox's TUN device and the host
// side's netstack (transparent egress).
const nTransparent = "sandbox-run transparent (TUN + netstack, no proxy variables)"

// transparentVariant runs the same fetch client inside sandbox-run with
// -noproxy, so it connects to the test host itself.
func (e *env) transparentVariant(h *testHost) netVariant {
	return netVariant{nTransparent, func(ctx context.Context, a []string) *exec.Cmd {
		args := []string{"run", "--workdir", e.work, "--read", e.binDir, "--allow-host", h.addr.String(), "--", e.exe, "fetch", "-noproxy"}
		return exec.CommandContext(ctx, e.bin, append(args, a...)...)
	}}
}

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
// through transparent egress, interleaved; the pooled times per variant.
func (e *env) measureConnect(h *testHost, rounds, n int, deadline time.Time) (map[string]sample, map[string]error) {
	dial := []string{"-addr", h.addr.String(), "-n", fmt.Sprint(n)}
	vs := []netVariant{
		{nDirect, func(ctx context.Context, a []string) *exec.Cmd {
			return exec.CommandContext(ctx, e.exe, append([]string{"dial"}, a...)...)
		}},
		{nTransparent, func(ctx context.Context, a []string) *exec.Cmd {
			args := []string{"run", "--workdir", e.work, "--read", e.binDir, "--allow-host", h.addr.String(), "--", e.exe, "dial"}
			return exec.CommandContext(ctx, e.bin, append(args, a...)...)
		}},
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

// transparentGoals are the summary rows of transparent egress: the
// download against straight through the proxy (goal ≥ 0.9x), and the
// connection set-up added over a direct connect (reported, no goal).
func (r *report) transparentGoals() [][3]string {
	n := r.net
	if n == nil {
		return nil
	}
	var rows [][3]string
	if tr, st := median(n.throughput[nTransparent]), median(n.throughput[nProxy]); tr > 0 && st > 0 {
		x := tr / st
		rows = append(rows, [3]string{"egress: transparent (netstack) ≥ 0.9x straight through", fmt.Sprintf("%.2fx", x),
			verdict(x >= 0.9, fmt.Sprintf("by %.2fx", 0.9-x))})
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
