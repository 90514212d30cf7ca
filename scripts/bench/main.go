//go:build linux

// Command bench measures sandbox-run against the physical floor (raw
// bubblewrap with the same namespaces, mounts and seccomp program) and
// against Anthropic's sandbox-runtime (srt) and OpenAI Codex's `codex
// sandbox` (start-up), and writes docs/BENCHMARKS.md. `make bench` runs it
// through scripts/bench.sh, which installs srt and codex first.
//
// Every table comes from one interleaved run (A B C, B C A, ...) so that a
// noisy machine affects every column alike; the report gives medians,
// min/max and ratios measured in that run, never an absolute time alone.
// Nothing here asserts a time.
//
// Usage:
//
//	bench -bin bin/sandbox-run [-srt PATH/cli.js] [-codex PATH/codex] [-out docs/BENCHMARKS.md] [-quick]
//	bench -bin bin/sandbox-run -startup-only     (make bench-startup: print, write nothing)
//	bench transparent -bin bin/sandbox-run [-n ROUNDS] [-size BYTES] [-connects N] [-baseline-bin B1,B2]
//	                                             (make bench-transparent: print, write nothing)
//
// Hidden modes used by the benchmark itself: serve ADDR (the test host in
// its network namespace), proxy-tcp ALLOW... (the egress proxy on loopback
// TCP), relay tcp|SOCKET UPSTREAM (a bare splice relay: the floor of any
// relay), fetch -url URL [-n N] (the client, the same on every path),
// load (many concurrent clients through a proxy on a Unix socket),
// proxy-unix SOCK ALLOW... (the proxy package, reporting its goroutines),
// mcp-server (internal/mcptest's MCP server on stdio) and mcp-client -n N
// -- CMD... (an mcp-go client making N tools/call round trips).
//
// Everything it creates (a temp dir under /tmp, a network namespace and a
// veth pair, child processes) is removed on exit and on SIGINT/SIGTERM.
// Every loop is bounded in count and by -max-time.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/landlock"
)

// env is the benchmark's fixed setup.
type env struct {
	bin     string // sandbox-run
	exe     string // this program, copied to binDir so that sandboxes can run it
	binDir  string
	base    string // the temp dir holding everything below
	work    string // workdir (owned by the sandbox uid when root)
	bigWork string // a workdir of bigDirs × bigFiles files beside a .git (owned like work)
	srtWork string // srt's workdir: the same files, owned by the caller (srt runs as the caller)
	ro      string // files for --read growth
	seccomp string // the seccomp program, for raw bwrap
	tinyErr error  // why the tiny init (profile) could not be built
}

// cleanups run in reverse order at exit or on a signal, once.
var (
	cleanupMu sync.Mutex
	cleanups  []func()
)

func atExit(f func()) {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	cleanups = append(cleanups, f)
}

func runCleanups() {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	cleanups = nil
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "serve":
			os.Exit(serveMain(os.Args[2:]))
		case "tls-only":
			os.Exit(tlsOnlyMain(os.Args[2:]))
		case "serve-tls":
			os.Exit(serveTLSMain(os.Args[2:]))
		case "proxy-tcp":
			os.Exit(proxyMain(os.Args[2:]))
		case "relay":
			os.Exit(relayMain(os.Args[2:]))
		case "fetch":
			os.Exit(fetchMain(os.Args[2:]))
		case "dial":
			os.Exit(dialMain(os.Args[2:]))
		case "load":
			os.Exit(loadMain(os.Args[2:]))
		case "proxy-unix":
			os.Exit(proxyUnixMain(os.Args[2:]))
		case "mcp-server":
			os.Exit(mcpServerMain())
		case "mcp-client":
			os.Exit(mcpClientMain(os.Args[2:]))
		case "images":
			os.Exit(imagesMain(os.Args[2:]))
		case "proxy-load":
			code := proxyLoadMain(os.Args[2:])
			runCleanups()
			os.Exit(code)
		case "transparent":
			os.Exit(transparentMain(os.Args[2:]))
		}
	}
	code := run()
	runCleanups()
	os.Exit(code)
}

// options are bench's flags: the binaries compared and how much to measure.
type options struct {
	bin, srtCLI, srtInstallErr, codexBin, codexInstallErr, out, micro string

	rounds, extraRounds, netRounds, latTotal, scaleN, scaleRounds    int
	conns, perConn, loadRounds, pace, memRounds, mcpCalls, traceRuns int

	quick, startupOnly bool
	size               int64
	maxTime            time.Duration
}

// parseOptions reads the command line into options; -quick lowers the
// counts to a one-minute subset.
func parseOptions() options {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/sandbox-run", "sandbox-run binary")
	flag.StringVar(&o.srtCLI, "srt", "", "srt's dist/cli.js (empty: no srt column)")
	flag.StringVar(&o.srtInstallErr, "srt-error", "", "why srt could not be installed (from scripts/bench.sh)")
	flag.StringVar(&o.codexBin, "codex", "", "the native codex binary (empty: no codex row)")
	flag.StringVar(&o.codexInstallErr, "codex-error", "", "why codex could not be installed (from scripts/bench.sh)")
	flag.StringVar(&o.out, "out", "docs/BENCHMARKS.md", "report to write")
	flag.IntVar(&o.rounds, "n", 25, "start-up rounds (each variant once per round; at least 20 for the report)")
	flag.IntVar(&o.extraRounds, "extra-rounds", 75, "more rounds, alone, of the variants the goals compare by a difference of medians (raw bwrap, run, run --allow-host, the growth series below 1000 binds)")
	flag.BoolVar(&o.quick, "quick", false, "a one-minute subset: fewer rounds, sizes and growth points")
	flag.BoolVar(&o.startupOnly, "startup-only", false, "measure plain exec, raw bwrap and sandbox-run only; print, write nothing")
	flag.Int64Var(&o.size, "size", 256<<20, "download size in bytes")
	flag.IntVar(&o.netRounds, "net-rounds", 5, "downloads per network variant")
	flag.IntVar(&o.latTotal, "requests", 1000, "small GETs per network variant (in 4 interleaved batches)")
	flag.StringVar(&o.micro, "micro", "", "file with `go test -bench` output to include")
	flag.DurationVar(&o.maxTime, "max-time", 20*time.Minute, "time bound of the whole run (checked between rounds)")
	flag.IntVar(&o.scaleN, "scale-n", 50, "sandboxes started at once (section 5)")
	flag.IntVar(&o.scaleRounds, "scale-rounds", 3, "bursts per scale variant")
	flag.IntVar(&o.conns, "conns", 500, "concurrent connections to the node-wide proxy")
	flag.IntVar(&o.perConn, "per-conn", 10, "sequential requests per connection")
	flag.IntVar(&o.loadRounds, "load-rounds", 5, "load runs per path (interleaved)")
	flag.IntVar(&o.pace, "rate", 1000, "requests per second of the paced loads (section 5)")
	flag.IntVar(&o.memRounds, "mem-rounds", 5, "runs per memory variant")
	flag.IntVar(&o.mcpCalls, "mcp-calls", 1000, "tools/call round trips per MCP variant (in 4 interleaved batches)")
	flag.IntVar(&o.traceRuns, "trace-runs", 11, "strace'd runs for the start-up profile")
	flag.Parse()
	if o.quick {
		o.rounds = min(o.rounds, 10)
		o.size = min(o.size, 64<<20)
		o.netRounds = min(o.netRounds, 2)
		o.latTotal = min(o.latTotal, 200)
		o.scaleRounds = min(o.scaleRounds, 1)
		o.loadRounds = min(o.loadRounds, 2)
		o.memRounds = min(o.memRounds, 2)
		o.mcpCalls = min(o.mcpCalls, 200)
		o.traceRuns = min(o.traceRuns, 5)
	}
	return o
}

// cleanUpOnSignal runs the cleanups and exits 130 on SIGINT or SIGTERM, so
// that an interrupted run leaves no namespace, veth or temp dir behind.
func cleanUpOnSignal() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "bench: %v: cleaning up\n", s)
		runCleanups()
		os.Exit(130)
	}()
}

// run is the full benchmark: every section, then the report written to
// -out and its summary printed. Its exit code is 1 only when the setup,
// the start-up variants or the report's file fail; a section that cannot
// run says why in the report instead.
func run() int {
	o := parseOptions()
	deadline := time.Now().Add(o.maxTime)
	cleanUpOnSignal()
	e, err := setup(o.bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: setup:", err)
		return 1
	}
	if o.startupOnly {
		return startupOnlyMain(e, o.rounds, deadline)
	}
	rep := &report{quick: o.quick, rounds: o.rounds, info: machineInfo(e.bin), goalExtra: map[string]sample{}}
	rep.info.loadStart = loadAvg()
	if e.tinyErr = e.buildTinyInit(); e.tinyErr != nil {
		fmt.Fprintln(os.Stderr, "bench: tiny init:", e.tinyErr)
	}
	srt, codex := e.competitors(o, rep)
	if err := e.measureStartup(o, rep, srt, codex, deadline); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "bench: profile: %d traced runs\n", o.traceRuns)
	rep.profile = e.measureProfile(o.traceRuns, deadline)
	fmt.Fprintf(os.Stderr, "bench: memory: %d rounds\n", o.memRounds)
	rep.mem = e.measureMemoryAll(srt, o.memRounds, deadline)
	fmt.Fprintf(os.Stderr, "bench: mcp: %d calls per variant\n", o.mcpCalls)
	rep.mcp = e.measureMCP(4, max(1, o.mcpCalls/4), deadline)
	rep.netErr = e.measureNetwork(o, rep, srt, deadline)
	if o.micro != "" {
		b, err := os.ReadFile(o.micro)
		if err == nil {
			rep.micro = string(b)
		}
	}
	rep.info.loadEnd = loadAvg()
	md := rep.markdown()
	if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	fmt.Print(rep.summary())
	fmt.Fprintf(os.Stderr, "bench: wrote %s\n", o.out)
	return 0
}

// competitors sets up srt and codex, the tools compared with sandbox-run.
// One that cannot be set up is not measured: the report says why (the
// install script's reason first), and rep.info names the versions of
// those that are. Each is returned as its constructor gave it.
func (e *env) competitors(o options, rep *report) (*srtEnv, *codexEnv) {
	srt, err := newSRT(o.srtCLI, e.srtWork, e.base)
	if err != nil && o.srtInstallErr != "" {
		err = errors.New(o.srtInstallErr)
	}
	if err != nil {
		rep.srtErr = err
		fmt.Fprintln(os.Stderr, "bench: srt not measured:", err)
	} else {
		rep.info.srt = srt.version
	}
	codex, err := newCodex(o.codexBin, filepath.Join(".cache", "codex", "home"), e.srtWork)
	if err != nil && o.codexInstallErr != "" {
		err = errors.New(o.codexInstallErr)
	}
	if err != nil {
		rep.codexErr = err
		fmt.Fprintln(os.Stderr, "bench: codex not measured:", err)
	} else {
		rep.info.codex = codex.version
	}
	return srt, codex
}

// measureStartup runs the start-up variants (and the profile's) for the
// main rounds, interleaved, then the goal series' extra rounds. The
// error is only that the variants could not be built.
func (e *env) measureStartup(o options, rep *report, srt *srtEnv, codex *codexEnv, deadline time.Time) error {
	vs, err := e.startupVariants(o.quick, srt, codex)
	if err != nil {
		return err
	}
	pvs, err := e.profileVariants()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: profile variants:", err)
	}
	vs = append(vs, pvs...)
	fmt.Fprintf(os.Stderr, "bench: start-up, %d variants x %d rounds, interleaved\n", len(vs), o.rounds)
	rep.startup, rep.startupFailed = interleave(vs, o.rounds, deadline)
	if xvs := extraSeries(vs); len(xvs) > 0 && !o.quick && o.extraRounds > 0 {
		fmt.Fprintf(os.Stderr, "bench: goal series, %d variants x %d more rounds, interleaved\n", len(xvs), o.extraRounds)
		rep.addExtraRounds(interleave(xvs, o.extraRounds, deadline))
		rep.extraRounds = o.extraRounds
	}
	return nil
}

// addExtraRounds files the goal series' extra rounds: raw bwrap's, run's
// and run --allow-host's apart in goalExtra (the table and the profile
// compare the main rounds' medians with each other), the growth series'
// with the main rounds.
func (r *report) addExtraRounds(times map[string]sample, failed map[string]error) {
	for name, t := range times {
		switch name {
		case vRaw, vSR, vSRNet:
			r.goalExtra[name] = t
		default:
			r.startup[name] = append(r.startup[name], t...)
		}
	}
	for name, err := range failed {
		r.startupFailed[name] = err
	}
}

// measureNetwork starts the test host and the loopback TCP proxy, then
// measures downloads and requests, TLS, connection set-up and scale. Its
// error is why none of them (or, for srt's host, why srt's column) could
// be measured; nil when all ran.
func (e *env) measureNetwork(o options, rep *report, srt *srtEnv, deadline time.Time) (netErr error) {
	h, err := newTestHost(e.exe)
	if err != nil {
		return fmt.Errorf("test host: %w", err)
	}
	atExit(h.close)
	p, err := startTCPProxy(e.exe, h.addr.String())
	if err != nil {
		return err
	}
	atExit(p.close)
	if srt != nil {
		if err := srt.setHost(e.base, e.srtWork, h.addr.Addr().String()); err != nil {
			netErr = err
		}
	}
	rl, err := startRelay(e.exe, "tcp", h.addr.String())
	if err != nil {
		return err
	}
	atExit(rl.close)
	nvs := append(e.netVariants(h, p, srt), e.transparentVariant(h), e.relayVariant(rl))
	fmt.Fprintf(os.Stderr, "bench: network, %d variants: %d downloads of %d MiB, %d requests each\n",
		len(nvs), o.netRounds, o.size>>20, o.latTotal)
	rep.net, rep.tls = e.measureNetTLS(nvs, h, o.size, o.netRounds, max(1, o.latTotal/4), o.perConn, deadline)
	rep.connect, rep.connectFailed = e.measureConnect(h, 4, max(1, o.latTotal/4), deadline)
	rep.scale = e.measureScale(h, o.scaleN, o.scaleRounds, o.conns, o.perConn, o.loadRounds, o.pace, deadline)
	return netErr
}

// setup creates the temp tree: a workdir with the protected paths of a
// typical checkout and p0000..p0999 (so that raw bwrap can bind the same
// paths sandbox-run would otherwise make placeholders for), r0000..r0999
// to --read, a copy of this program and the seccomp program.
func setup(bin string) (*env, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp("/tmp", "sbx-bench-")
	if err != nil {
		return nil, err
	}
	atExit(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		return nil, err
	}
	e := &env{bin: abs, base: base, work: filepath.Join(base, "work"), ro: filepath.Join(base, "ro"),
		binDir: filepath.Join(base, "bin"), seccomp: filepath.Join(base, "seccomp.bpf"), srtWork: filepath.Join(base, "srtwork")}
	for _, w := range []string{e.work, e.srtWork} {
		for _, d := range []string{w, e.ro, e.binDir, w + "/.git/hooks", w + "/.vscode", w + "/.idea", w + "/.claude"} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
		}
	}
	files := []string{".git/config", ".gitmodules", ".mcp.json", ".bashrc", ".bash_profile", ".profile", ".zshrc"}
	for i := 0; i < 1000; i++ {
		files = append(files, fmt.Sprintf("p%04d", i))
		if err := os.WriteFile(filepath.Join(e.ro, fmt.Sprintf("r%04d", i)), nil, 0o644); err != nil {
			return nil, err
		}
	}
	for i, f := range files {
		if err := os.WriteFile(filepath.Join(e.work, f), nil, 0o644); err != nil {
			return nil, err
		}
		if i < 7 { // the protected paths of a checkout, not the growth series
			if err := os.WriteFile(filepath.Join(e.srtWork, f), nil, 0o644); err != nil {
				return nil, err
			}
		}
	}
	e.bigWork = filepath.Join(base, "bigwork")
	if err := makeBigWork(e.bigWork); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		for _, w := range []string{e.work, e.bigWork} {
			if err := filepath.Walk(w, func(p string, _ os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(p, 65534, 65534)
			}); err != nil {
				return nil, err
			}
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	e.exe = filepath.Join(e.binDir, "sbx-bench")
	if err := copyFile(self, e.exe, 0o755); err != nil {
		return nil, err
	}
	return e, writeSeccomp(e.seccomp)
}

// The large workdir: a checkout of bigDirs directories of bigFiles files.
const bigDirs, bigFiles = 100, 100

// makeBigWork makes the large workdir at dir: a .git with its config and
// hooks, and bigDirs × bigFiles empty files.
func makeBigWork(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", "config"), nil, 0o644); err != nil {
		return err
	}
	for i := range bigDirs {
		d := filepath.Join(dir, "src", fmt.Sprintf("d%03d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		for j := range bigFiles {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d", j)), nil, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// startupOnlyMain is `make bench-startup`: plain exec, raw bwrap and
// sandbox-run, interleaved; printed, nothing written.
func startupOnlyMain(e *env, rounds int, deadline time.Time) int {
	vs, err := e.startupVariants(true, nil, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	vs = pick(vs, vPlain, vRaw, vSR, vSRNet, vSRLL)
	floorErr := e.buildFloor()
	if floorErr == nil {
		var fv variant
		if fv, floorErr = e.floorVariant(); floorErr == nil {
			vs = append(vs, fv)
		}
	}
	times, failed := interleave(vs, rounds, deadline)
	if len(failed) > 0 {
		return 1
	}
	fmt.Printf("%-52s %10s %10s %10s  (n=%d, interleaved)\n", "command", "median", "min", "max", rounds)
	for _, v := range vs {
		t := times[v.name]
		name := v.name
		if name == vFloor {
			name = "this design's floor (Go launcher: bwrap, wait)"
		}
		fmt.Printf("%-52s %10s %10s %10s\n", name, ms(t.median()), ms(t.min()), ms(t.max()))
	}
	fmt.Printf("ratio sandbox-run / raw bwrap (medians): %s (goal <= 1.5x)\n", ratio(times[vSR].median(), times[vRaw].median()))
	if f, ok := times[vFloor]; ok {
		// What any Go launcher with the trampoline pays (see floorMain).
		fmt.Printf("ratio this design's floor / raw bwrap (medians): %s; sandbox-run / floor: %s\n",
			ratio(f.median(), times[vRaw].median()), ratio(times[vSR].median(), f.median()))
	} else {
		fmt.Printf("this design's floor: not measured (%v)\n", floorErr)
	}
	fmt.Printf("network costs (medians): %s more (goal <= 3 ms)\n", ms(times[vSRNet].median()-times[vSR].median()))
	if ll, ok := times[vSRLL]; ok {
		// Nothing is mounted and no namespace is made: it should be the
		// quickest tier-1 start.
		fmt.Printf("ratio sandbox-run --sandbox landlock / raw bwrap (medians): %s; / sandbox-run (bwrap): %s\n",
			ratio(ll.median(), times[vRaw].median()), ratio(ll.median(), times[vSR].median()))
	} else {
		fmt.Printf("sandbox-run --sandbox landlock: not measured (no Landlock ABI %d here)\n", landlock.MinABI)
	}
	return 0
}

// pick keeps the variants of vs named names, in vs's order; a name not
// in vs (a mechanism this host lacks) is left out.
func pick(vs []variant, names ...string) []variant {
	var out []variant
	for _, v := range vs {
		if slices.Contains(names, v.name) {
			out = append(out, v)
		}
	}
	return out
}

// info is the machine and the versions, for the report's header.
type info struct {
	date, cpu, kernel, bwrap, sandboxRun, describe, srt, codex, node, goVersion string
	loadStart, loadEnd                                                          string
	cores                                                                       int
}

func machineInfo(bin string) info {
	outOf := func(name string, args ...string) string {
		b, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return "unavailable (" + err.Error() + ")"
		}
		return strings.TrimSpace(string(b))
	}
	in := info{date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), cores: numCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				in.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		in.kernel = strings.TrimSpace(string(b))
	}
	in.bwrap = outOf("bwrap", "--version")
	in.sandboxRun = outOf(bin, "version")
	in.describe = outOf("git", "describe", "--always", "--dirty")
	in.node = outOf("node", "--version")
	in.srt = "not measured"
	in.codex = "not measured"
	in.goVersion = goVersion()
	return in
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unavailable"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unavailable"
	}
	return strings.Join(f[:3], " ")
}
