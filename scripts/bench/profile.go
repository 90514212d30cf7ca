//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/bwrap"
)

// The profile of one `sandbox-run run -- true`: extra start-up variants
// (run in the rounds of section 1), a traced run to place the phases, and
// in-process timings of the steps too short to see from outside.

// Names of the profiling variants (section 1's rounds).
const (
	vTinyGo  = "tiny Go binary (initproc only; no arguments: exits at once)"
	vSRDry   = "sandbox-run run --dry-run (detect + plan, no bwrap)"
	vRawInit = "raw bwrap, then sandbox-run itself as init (14 MB binary, as after go install), then true"
	vRawTiny = "raw bwrap, then sandbox-run-init (the init make build ships), then true"
	vRawNoop = "raw bwrap, then the tiny Go binary (exits at once)"
	vFloor   = "this design's floor: a Go launcher that only fork-execs the same raw bwrap call with the trampoline's ceiling line (`ulimit -u N` or `-p N`, then exec `true`), waits and exits"
)

// floorMain is the least a Go launcher of this design does: start, drop
// to the sandbox's uid when root, fork-exec bwrap (its argv, the seccomp
// program on fd 3) and wait. No flags, no planning, no readback gate, no
// report: the difference between it and sandbox-run run is all that
// sandbox-run does beyond being a Go launcher with a sh trampoline.
const floorMain = `package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	c := exec.Command(os.Args[1], os.Args[2:]...)
	c.Env = []string{}
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.ExtraFiles = []*os.File{os.NewFile(3, "seccomp")}
	if os.Geteuid() == 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	}
	if err := c.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.ExitCode())
		}
		os.Exit(125)
	}
}
`

// tinyInitMain is the main package of the tiny init: the init of
// internal/initproc and nothing else. It must live inside the module to
// import an internal package; buildTinyInit writes it into a temp dir
// under scripts/bench and removes the dir once built.
const tinyInitMain = `package main

import (
	"os"

	"github.com/sandbox-run/sandbox-run/internal/initproc"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == initproc.Arg {
		os.Exit(initproc.Main(os.Args[2:]))
	}
}
`

// buildTinyInit builds the tiny Go binary into e.binDir and copies
// sandbox-run and the sandbox-run-init beside it there too (raw bwrap
// binds binDir, so each can run as init).
func (e *env) buildTinyInit() error {
	if err := copyFile(e.bin, filepath.Join(e.binDir, "sandbox-run"), 0o755); err != nil {
		return err
	}
	if err := copyFile(e.bin+"-init", filepath.Join(e.binDir, "sandbox-run-init"), 0o755); err != nil {
		return fmt.Errorf("no sandbox-run-init beside %s (make build makes it): %w", e.bin, err)
	}
	if err := buildMain(tinyInitMain, filepath.Join(e.binDir, "tinyinit")); err != nil {
		return err
	}
	return e.buildFloor()
}

// buildFloor builds floorMain into e.binDir.
func (e *env) buildFloor() error { return buildMain(floorMain, filepath.Join(e.binDir, "floor")) }

// buildMain builds the main package src into out: static, as make build
// makes sandbox-run, from a temp dir inside the module (so that it may
// import internal packages), removed once built.
func buildMain(src, out string) error {
	dir, err := os.MkdirTemp("scripts/bench", "tinymain")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	atExit(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./"+dir)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := build.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %v: %s", err, lastLines(string(b), 5))
	}
	return nil
}

// rawWith is raw bwrap (the same sandbox as sandbox-run run, see rawBwrap)
// with binDir bound read-only, running argv; fds 4 and 5 are /dev/null, for
// an init's --status-fd 4 --stderr-fd 5.
func (e *env) rawWith(argv ...string) (variant, error) {
	_, base, err := e.dryRaw(nil)
	if err != nil {
		return variant{}, err
	}
	// An init must be PID 1 (sandbox-run passes --as-pid-1 when it starts
	// one; its fast path, which --dry-run shows here, does not).
	base = append(base[:len(base)-2], "--as-pid-1", "--seccomp", "3", "--ro-bind", e.binDir, e.binDir, "--")
	full := append(base, argv...)
	return variant{cmd: func(ctx context.Context) (*exec.Cmd, func()) {
		c := exec.CommandContext(ctx, full[0], full[1:]...)
		c.Env = []string{}
		if os.Geteuid() == 0 {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		}
		f := e.openSeccomp()
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			panic(err)
		}
		c.ExtraFiles = []*os.File{f, null, null}
		return c, func() { f.Close(); null.Close() }
	}}, nil
}

// profileVariants are the variants the start-up profile needs beyond
// section 1's; err says why the tiny ones are missing.
func (e *env) profileVariants() ([]variant, error) {
	var vs []variant
	dry := e.sandboxRun([]string{"--dry-run"}, "/usr/bin/true")
	dry.name = vSRDry
	vs = append(vs, dry)
	initArgs := []string{initArg, "--status-fd", "4", "--stderr-fd", "5", "--", "/usr/bin/true"}
	full, err := e.rawWith(append([]string{filepath.Join(e.binDir, "sandbox-run")}, initArgs...)...)
	if err != nil {
		return vs, err
	}
	full.name = vRawInit
	vs = append(vs, full)
	if e.tinyErr != nil {
		return vs, e.tinyErr
	}
	tiny := filepath.Join(e.binDir, "tinyinit")
	vs = append(vs, variant{name: vTinyGo, cmd: func(ctx context.Context) (*exec.Cmd, func()) {
		return exec.CommandContext(ctx, tiny), nil
	}})
	t, err := e.rawWith(append([]string{filepath.Join(e.binDir, "sandbox-run-init")}, initArgs...)...)
	if err != nil {
		return vs, err
	}
	t.name = vRawTiny
	noop, err := e.rawWith(tiny)
	if err != nil {
		return vs, err
	}
	noop.name = vRawNoop
	floor, err := e.floorVariant()
	if err != nil {
		return append(vs, t, noop), err
	}
	return append(vs, t, noop, floor), nil
}

// floorVariant is vFloor: the floor binary running raw bwrap (the same
// call as vRaw) with the trampoline's process ceiling line, the ceiling
// sandbox-run's --dry-run shows.
func (e *env) floorVariant() (variant, error) {
	dry, base, err := e.dryRaw(nil)
	if err != nil {
		return variant{}, err
	}
	m := regexp.MustCompile(`ulimit -u ([0-9]+)`).FindSubmatch(dry)
	if m == nil {
		return variant{}, fmt.Errorf("sandbox-run --dry-run shows no ulimit -u line:\n%s", lastLines(string(dry), 5))
	}
	// The trampoline's own line: dash has -p, bash and busybox -u.
	n := string(m[1])
	line := "ulimit -u " + n + " 2>/dev/null || ulimit -p " + n + ` 2>/dev/null || exit 125; exec "$@"`
	argv := append(base[:len(base)-2], "--seccomp", "3", "--", "/bin/sh", "-c", line, "true", "/usr/bin/true")
	floor := filepath.Join(e.binDir, "floor")
	return variant{name: vFloor, cmd: func(ctx context.Context) (*exec.Cmd, func()) {
		c := exec.CommandContext(ctx, floor, argv...)
		f := e.openSeccomp()
		c.ExtraFiles = []*os.File{f}
		return c, func() { f.Close() }
	}}, nil
}

// initArg is initproc.Arg, spelled out so that this program does not need
// to import the init.
const initArg = "__sandbox-init"

// ---- the traced run -----------------------------------------------------

// Phases of one `sandbox-run run -- true`, from strace's timestamps.
var phaseNames = []string{
	"sandbox-run exec → bwrap exec (Go start, flags, bwrap detection, planning, spawn)",
	"bwrap exec → trampoline exec (bwrap: namespaces, mounts, seccomp)",
	"trampoline exec → command exec (sh: readback, status, exec)",
	"command exec → command exit (`true` itself)",
	"command exit → its process gone",
	"command gone → bwrap gone (bwrap's PID 1 and monitor end)",
	"bwrap gone → sandbox-run gone (launcher teardown: status, report, exit)",
}

// traceOnce runs `strace -f --seccomp-bpf -ttt -e trace=execve,exit_group`
// on one sandbox-run run and returns the phases' durations and the total.
func (e *env) traceOnce(out string) ([]time.Duration, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, "strace", "-f", "--seccomp-bpf", "-ttt", "-e", "trace=execve,exit_group", "-o", out,
		e.bin, "run", "--workdir", e.work, "--", "/usr/bin/true")
	var stderr bytes.Buffer
	c.Stderr = &stderr
	c.WaitDelay = 5 * time.Second
	if err := c.Run(); err != nil {
		return nil, 0, fmt.Errorf("%v: %s", err, lastLines(stderr.String(), 3))
	}
	f, err := os.Open(out)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	return readTrace(f).phases(out)
}

// traceEvents are the events of one traced run that bound its phases:
// the first execs of sandbox-run, bwrap, init (or the sh trampoline) and
// the command, the command's exit_group, and when each process was gone.
type traceEvents struct {
	srPID, bwPID, initPID, cmdPID int
	// t holds the events' times in phase order (phaseNames's bounds):
	// the four execs, the command's exit_group, then init, bwrap and
	// sandbox-run gone. 0 is an event not seen.
	t       [8]float64
	exited  map[int]float64 // pid → its "+++ exited" time
	pending map[int]string  // pid → an execve line strace split ("<unfinished ...>")
}

// readTrace reads strace's output from r. A line it cannot parse is
// skipped: what is missing shows in phases.
func readTrace(r io.Reader) *traceEvents {
	ev := &traceEvents{exited: map[int]float64{}, pending: map[int]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		ev.line(sc.Text())
	}
	ev.t[5], ev.t[6], ev.t[7] = ev.exited[ev.initPID], ev.exited[ev.bwPID], ev.exited[ev.srPID]
	return ev
}

// splitTraceLine splits "PID  TIMESTAMP CALL...": strace pads the pid
// column, so the fields are split on runs of blanks. ok is false for a
// line that is not an event.
func splitTraceLine(line string) (pid int, ts float64, rest string, ok bool) {
	fs := strings.Fields(line)
	if len(fs) < 3 {
		return 0, 0, "", false
	}
	pid, err1 := strconv.Atoi(fs[0])
	ts, err2 := strconv.ParseFloat(fs[1], 64)
	if err1 != nil || err2 != nil {
		return 0, 0, "", false
	}
	return pid, ts, strings.TrimSpace(line[strings.Index(line, fs[1])+len(fs[1]):]), true
}

// line records one line of the trace, joining an execve that strace split
// across an "<unfinished ...>" and its "<... execve resumed>".
func (ev *traceEvents) line(line string) {
	pid, ts, rest, ok := splitTraceLine(line)
	if !ok {
		return
	}
	if strings.HasPrefix(rest, "execve(") && strings.HasSuffix(rest, "<unfinished ...>") {
		ev.pending[pid] = strings.TrimSuffix(rest, "<unfinished ...>")
		return
	}
	if r, ok := strings.CutPrefix(rest, "<... execve resumed>"); ok {
		rest = ev.pending[pid] + r
		delete(ev.pending, pid)
	}
	switch {
	case strings.HasPrefix(rest, "execve(") && strings.HasSuffix(rest, "= 0"):
		ev.exec(pid, ts, rest)
	case strings.HasPrefix(rest, "exit_group(") && pid == ev.cmdPID && ev.t[4] == 0:
		ev.t[4] = ts
	case strings.HasPrefix(rest, "+++ exited"):
		ev.exited[pid] = ts
	}
}

// exec records a successful execve: the first one is sandbox-run's, then
// the first of bwrap, of init (or, on the fast path, the sh trampoline)
// and of the command, each once.
func (ev *traceEvents) exec(pid int, ts float64, call string) {
	switch {
	case ev.srPID == 0:
		ev.srPID, ev.t[0] = pid, ts
	case ev.bwPID == 0 && strings.Contains(call, "bwrap"):
		ev.bwPID, ev.t[1] = pid, ts
	case ev.initPID == 0 && (strings.Contains(call, initArg) || strings.HasPrefix(call, `execve("/bin/sh"`)):
		ev.initPID, ev.t[2] = pid, ts
	case ev.cmdPID == 0 && strings.HasPrefix(call, `execve("/usr/bin/true"`):
		ev.cmdPID, ev.t[3] = pid, ts
	}
}

// phases are the durations between consecutive events and the total, or
// an error naming the first event the trace out lacks.
func (ev *traceEvents) phases(out string) ([]time.Duration, time.Duration, error) {
	for i := range ev.t {
		if ev.t[i] == 0 {
			return nil, 0, fmt.Errorf("trace %s: event %d not found (pids %d %d %d %d)", out, i, ev.srPID, ev.bwPID, ev.initPID, ev.cmdPID)
		}
	}
	ph := make([]time.Duration, len(phaseNames))
	for i := range ph {
		ph[i] = time.Duration((ev.t[i+1] - ev.t[i]) * 1e9)
	}
	return ph, time.Duration((ev.t[7] - ev.t[0]) * 1e9), nil
}

// profileResult is the start-up profile.
type profileResult struct {
	phases    []sample
	traced    sample
	traceErr  error
	detect    time.Duration // cached bwrap detection, in-process
	detectErr error
	tinySize  int64
	fullSize  int64
	tinyErr   error

	// File system calls (strace -f -c -e trace=%file) of `run --dry-run
	// -- true` in the workdir and of `version`: a count, the same on a
	// loaded machine, so planning's cost is tracked without a clock.
	dryCalls, versionCalls int
	callsErr               error

	initRuns      int
	initTotal     time.Duration // package inits of `sandbox-run version`, median
	tinyInitTotal time.Duration // the same for the tiny binary
	initTop       []pkgInit
	initErr       error
}

// measureProfile traces n runs (after section 1, not interleaved: strace's
// own overhead would distort the other variants) and times the cached
// bwrap detection in-process.
func (e *env) measureProfile(n int, deadline time.Time) *profileResult {
	p := &profileResult{phases: make([]sample, len(phaseNames)), tinyErr: e.tinyErr}
	if fi, err := os.Stat(filepath.Join(e.binDir, "tinyinit")); err == nil {
		p.tinySize = fi.Size()
	}
	if fi, err := os.Stat(e.bin); err == nil {
		p.fullSize = fi.Size()
	}
	if _, err := exec.LookPath("strace"); err != nil {
		p.traceErr = fmt.Errorf("strace not found: %w", err)
	} else {
		out := filepath.Join(e.base, "strace.txt")
		for i := 0; i < n; i++ {
			if i > 0 && time.Now().After(deadline) {
				break
			}
			ph, total, err := e.traceOnce(out)
			if err != nil {
				p.traceErr = err
				break
			}
			for k := range ph {
				p.phases[k] = append(p.phases[k], ph[k])
			}
			p.traced = append(p.traced, total)
		}
	}
	p.dryCalls, p.callsErr = e.fileCalls("run", "--dry-run", "--", "true")
	if p.callsErr == nil {
		p.versionCalls, p.callsErr = e.fileCalls("version")
	}
	p.initRuns = 11
	p.initTotal, p.initTop, p.initErr = initTrace(e.bin, []string{"version"}, p.initRuns)
	if e.tinyErr == nil && p.initErr == nil {
		p.tinyInitTotal, _, p.initErr = initTrace(filepath.Join(e.binDir, "tinyinit"), nil, p.initRuns)
	}
	bw, err := exec.LookPath("bwrap")
	if err != nil {
		p.detectErr = err
		return p
	}
	d := bwrap.Detector{CacheDir: filepath.Join(e.base, "bwrap-cache")}
	if err := os.MkdirAll(d.CacheDir, 0o700); err != nil {
		p.detectErr = err
		return p
	}
	if _, err := d.Detect(context.Background(), bw); err != nil { // fills the cache
		p.detectErr = err
		return p
	}
	r := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			if _, err := d.Detect(context.Background(), bw); err != nil {
				b.Fatal(err)
			}
		}
	})
	if r.N > 0 {
		p.detect = time.Duration(r.NsPerOp())
	}
	return p
}

// fileCalls counts the file system calls of sandbox-run with args, run in
// the workdir: strace -f -c -e trace=%file, its summary's total.
func (e *env) fileCalls(args ...string) (int, error) {
	if _, err := exec.LookPath("strace"); err != nil {
		return 0, fmt.Errorf("strace not found: %w", err)
	}
	out := filepath.Join(e.base, "strace-calls.txt")
	c := exec.Command("strace", append([]string{"-f", "-c", "-o", out, "-e", "trace=%file", e.bin}, args...)...)
	c.Dir = e.work
	if b, err := c.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("strace sandbox-run %s: %w: %s", strings.Join(args, " "), err, lastLines(string(b), 3))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return 0, err
	}
	return straceTotal(string(b))
}

// straceTotal is the calls column of strace -c's "total" line.
func straceTotal(summary string) (int, error) {
	for _, line := range strings.Split(summary, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && f[len(f)-1] == "total" {
			return strconv.Atoi(f[3])
		}
	}
	return 0, fmt.Errorf("no total in strace's summary:\n%s", lastLines(summary, 5))
}

// pkgInit is one package's init time, from GODEBUG=inittrace=1.
type pkgInit struct {
	pkg string
	d   time.Duration
}

// initTrace runs `BIN ARGS` n times with GODEBUG=inittrace=1 and returns
// the median total of the package inits' clock time and the packages
// whose median is largest.
func initTrace(bin string, args []string, n int) (time.Duration, []pkgInit, error) {
	var totals sample
	per := map[string]sample{}
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c := exec.CommandContext(ctx, bin, args...)
		c.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		var stderr bytes.Buffer
		c.Stderr = &stderr
		err := c.Run()
		cancel()
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %v", bin, err)
		}
		var total time.Duration
		for _, l := range strings.Split(stderr.String(), "\n") {
			// init PKG @X ms, Y ms clock, B bytes, A allocs
			f := strings.Fields(l)
			if len(f) < 7 || f[0] != "init" || f[5] != "ms" || f[6] != "clock," {
				continue
			}
			v, err := strconv.ParseFloat(f[4], 64)
			if err != nil {
				continue
			}
			d := time.Duration(v * 1e6)
			total += d
			per[f[1]] = append(per[f[1]], d)
		}
		totals = append(totals, total)
	}
	var top []pkgInit
	for k, v := range per {
		for len(v) < n { // absent from a run: it took nothing there
			v = append(v, 0)
		}
		top = append(top, pkgInit{k, v.median()})
	}
	slices.SortFunc(top, func(a, b pkgInit) int { return int(b.d - a.d) })
	return totals.median(), top[:min(5, len(top))], nil
}

// profileSection is "where are the milliseconds of a start?". Each phase
// is a difference of two medians of section 1's interleaved rounds, so the
// section is written only when every variant it subtracts ran.
func (r *report) profileSection(w func(string, ...any)) {
	w("## Where the milliseconds of a start go\n\n")
	m := r.startMedians()
	if m.plain == 0 || m.ver == 0 || m.dry == 0 || m.raw == 0 || m.sr == 0 || m.rawInit == 0 {
		w("Not measured in this run (a variant failed; see section 1).\n\n")
		return
	}
	r.profileVariantTable(w)
	phaseTable(w, m)
	r.profile.callsLine(w)
	initTable(w, m)
	r.profile.inside(w, m)
	r.profile.tracedTable(w, m.sr)
	r.profileConclusion(w, m)
}

// startMedians are the medians of section 1 that profileSection takes
// apart; 0 where a variant did not run.
type startMedians struct {
	plain, ver, dry, raw, sr, rawInit, rawTiny, rawNoop, tiny time.Duration
}

func (r *report) startMedians() startMedians {
	return startMedians{plain: r.med(vPlain), ver: r.med(vSRVer), dry: r.med(vSRDry), raw: r.med(vRaw), sr: r.med(vSR),
		rawInit: r.med(vRawInit), rawTiny: r.med(vRawTiny), rawNoop: r.med(vRawNoop), tiny: r.med(vTinyGo)}
}

// goStart is the Go process start of sandbox-run: `version` − plain exec.
func (m startMedians) goStart() time.Duration { return m.ver - m.plain }

// planning is flags, detection, seccomp and the plan: `--dry-run` − `version`.
func (m startMedians) planning() time.Duration { return m.dry - m.ver }

// rest is what run adds beyond planning and bwrap's own work.
// `sandbox-run run -- true` takes the fast path: no Go init inside,
// bwrap's PID 1 and a sh trampoline. The init rows are the cost the
// network path adds (--allow-host, --llm-socket), and rlimits.
func (m startMedians) rest() time.Duration { return m.sr - m.dry - (m.raw - m.plain) }

// haveTiny says the tiny binary and sandbox-run-init ran under raw bwrap.
func (m startMedians) haveTiny() bool { return m.rawTiny > 0 && m.rawNoop > 0 }

// phaseRow is one phase of a start: what it is, the difference that
// measures it, and that difference.
type phaseRow struct {
	what, how string
	d         time.Duration
}

// profileVariantTable lists the variants the phases are differences of,
// with why one failed.
func (r *report) profileVariantTable(w func(string, ...any)) {
	w("Measured, not estimated: the variants below ran in the interleaved rounds of section 1 (medians, %d rounds), and each "+
		"phase is the difference of two of them. The tiny Go binary is a main package holding only `internal/initproc` "+
		"(built for this run into a temp dir inside the module, then deleted): run with no arguments it exits at once; "+
		"as `tinyinit __sandbox-init --status-fd 4 --stderr-fd 5 -- true` it is sandbox-run's init, and raw bwrap starts it exactly "+
		"as sandbox-run starts its own.\n\n", len(r.startup[vSR]))
	w("| variant | median |\n|---|---:|\n")
	for _, name := range []string{vPlain, vTinyGo, vSRVer, vSRDry, vRaw, vFloor, vRawNoop, vRawTiny, vRawInit, vSR} {
		if t := r.startup[name]; len(t) > 0 {
			w("| %s | %s |\n", name, ms(t.median()))
		} else if err := r.startupFailed[name]; err != nil {
			w("| %s | failed: %s |\n", name, oneLine(err.Error()))
		}
	}
	w("\n")
}

// phaseTable splits `sandbox-run run -- true` into phases that sum to it,
// each with its share.
func phaseTable(w func(string, ...any), m startMedians) {
	rows := []phaseRow{
		{"fork+exec+wait of a process (the floor)", "plain exec of `true`", m.plain},
		{"Go process start of sandbox-run (14 MB binary, all package inits)", "`version` − plain exec", m.goStart()},
		{"flags, bwrap detection (cached), seccomp assembly, planning (pathguard)", "`--dry-run` − `version`", m.planning()},
		{"bwrap's own set-up and teardown (namespaces, mounts, seccomp)", "raw bwrap − plain exec", m.raw - m.plain},
		{"the rest: the sh trampoline inside (readback, exec of `true`), the launcher's spawn of bwrap, pipes and status, wait, report, teardown, and whatever differs between its bwrap call and the raw one (binds by descriptor, --info-fd)",
			"run − `--dry-run` − (raw − plain)", m.rest()},
	}
	w("| phase | measured as | median | share of `sandbox-run run` |\n|---|---|---:|---:|\n")
	for _, x := range rows {
		w("| %s | %s | %s | %.0f%% |\n", x.what, x.how, ms(x.d), 100*float64(x.d)/float64(m.sr))
	}
	w("| **sandbox-run run -- true** (the rows sum to it) | | **%s** | 100%% |\n\n", ms(m.sr))
}

// callsLine is planning's cost as a count: the file system calls of
// `run --dry-run` beyond `version`'s (the goal is at most 80).
func (p *profileResult) callsLine(w func(string, ...any)) {
	if p.callsErr != nil {
		w("Planning's file system calls: not counted (%v).\n\n", p.callsErr)
		return
	}
	w("Planning's file system calls (`strace -f -c -e trace=%%file`, in the workdir): `run --dry-run -- true` %d, `version` %d: **%d** for planning (goal: at most 80; a count, the same on any load).\n\n",
		p.dryCalls, p.versionCalls, p.dryCalls-p.versionCalls)
}

// initTable is what the Go init inside the sandbox costs on the network
// path; the tiny binary's rows only where it ran.
func initTable(w func(string, ...any), m startMedians) {
	w("When something is forwarded (`--allow-host`, `--llm-socket`) or an rlimit needs applying, a Go init runs inside the sandbox instead of the trampoline: sandbox-run-init, which links only `internal/initproc` (sandbox-run itself where it is missing); what that costs:\n\n")
	irows := []phaseRow{}
	if m.haveTiny() {
		irows = append(irows,
			phaseRow{"init: a (tiny) Go process start inside the sandbox, beyond exec'ing `true`", "raw + tiny binary − raw", m.rawNoop - m.raw},
			phaseRow{"init: its work (readback, signals, fork+exec of `true`, wait, status), sandbox-run-init", "raw + sandbox-run-init − raw + tiny binary", m.rawTiny - m.rawNoop},
			phaseRow{"**the in-sandbox init in all**, sandbox-run-init", "raw + sandbox-run-init − raw", m.rawTiny - m.raw},
			phaseRow{"what sandbox-run-init saves: sandbox-run's 14 MB binary as init instead", "raw + sandbox-run − raw + sandbox-run-init", m.rawInit - m.rawTiny})
	}
	irows = append(irows, phaseRow{"the in-sandbox init in all, sandbox-run itself as init", "raw + sandbox-run − raw", m.rawInit - m.raw})
	w("| init phase | measured as | median |\n|---|---|---:|\n")
	for _, x := range irows {
		w("| %s | %s | %s |\n", x.what, x.how, ms(x.d))
	}
	w("\n")
}

// inside looks into two rows from within the process: package init times,
// cached bwrap detection, and the tiny binary's start against sandbox-run's.
// Nothing when p is nil (the profile did not run).
func (p *profileResult) inside(w func(string, ...any), m startMedians) {
	if p == nil {
		return
	}
	if p.initErr == nil && p.initTotal > 0 {
		var parts []string
		for _, t := range p.initTop {
			parts = append(parts, fmt.Sprintf("%s %s", t.pkg, ms(t.d)))
		}
		w("Inside the Go start: `GODEBUG=inittrace=1 sandbox-run version` (%d runs) spends **%s** (median) in package "+
			"initialisers, the largest: %s. The tiny binary's inits take %s; sandbox-run-init, the init inside the "+
			"sandbox, links the same package and little more.\n\n", p.initRuns, ms(p.initTotal), strings.Join(parts, ", "), ms(p.tinyInitTotal))
	} else if p.initErr != nil {
		w("Package init times could not be traced: %s.\n\n", oneLine(p.initErr.Error()))
	}
	if p.detectErr == nil && p.detect > 0 {
		w("Inside the planning row: cached bwrap detection takes %s in-process (`bwrap.Detector.Detect` with a warm cache, "+
			"testing.Benchmark); seccomp assembly is BenchmarkAssemble below (under 0.1 ms); the rest of the %s is flag parsing "+
			"and the plan (pathguard resolutions, placeholder and access checks, descriptor opens).\n\n", us(p.detect), ms(m.planning()))
	} else if p.detectErr != nil {
		w("Cached bwrap detection could not be timed in-process: %s.\n\n", oneLine(p.detectErr.Error()))
	}
	if p.tinyErr != nil {
		w("The tiny binary or sandbox-run-init is missing: %s.\n\n", oneLine(p.tinyErr.Error()))
	} else if m.haveTiny() && m.tiny > 0 {
		w("Binary size: the tiny binary (%.1f MB) starts in %s outside the sandbox against %s for sandbox-run's (%.1f MB, `version`).\n\n",
			float64(p.tinySize)/1e6, ms(m.tiny-m.plain), ms(m.goStart()), float64(p.fullSize)/1e6)
	}
}

// tracedTable places the phases in strace'd runs, as shares only: strace
// slows every traced process, so its absolute times are not a start's.
// sr is the untraced run's median. Nothing when p is nil.
func (p *profileResult) tracedTable(w func(string, ...any), sr time.Duration) {
	if p != nil && len(p.traced) > 0 {
		w("Placing the phases: `strace -f --seccomp-bpf -ttt -e trace=execve,exit_group` on %d runs (after the rounds above, "+
			"not interleaved): the time between the exec and exit events of sandbox-run, bwrap, init and `true`. strace stops every "+
			"traced process at each fork, clone and traced call, so a traced run takes %s (median) against %s untraced: read "+
			"the shares, not the absolute times (each phase's median on its own; they need not add up to the median total).\n\n", len(p.traced), ms(p.traced.median()), ms(sr))
		w("| phase (traced) | median | share |\n|---|---:|---:|\n")
		for i, name := range phaseNames {
			w("| %s | %s | %.0f%% |\n", name, ms(p.phases[i].median()), 100*float64(p.phases[i].median())/float64(p.traced.median()))
		}
		w("\n")
	}
	if p != nil && p.traceErr != nil {
		w("Traced runs: %s.\n\n", oneLine(p.traceErr.Error()))
	}
}

// profileConclusion says what the phases mean for the 1.5x goal: the gap
// to raw bwrap split into its phases, the init's cost on the network path
// and the floor of this design.
func (r *report) profileConclusion(w func(string, ...any), m startMedians) {
	raw, sr, goStart, planning, rest := m.raw, m.sr, m.goStart(), m.planning(), m.rest()
	gap := sr - raw
	pct := func(d time.Duration) string { return fmt.Sprintf("%.0f%%", 100*float64(d)/float64(gap)) }
	w("What it says: sandbox-run adds **%s** to raw bwrap. Of that, the launcher's Go process start is %s (%s), its planning %s (%s), "+
		"and the rest (trampoline, spawn, wait, teardown) %s (%s).",
		ms(gap), ms(goStart), pct(goStart), ms(planning), pct(planning), ms(rest), pct(rest))
	if budget := raw / 2; goStart > budget {
		w(" The launcher's Go start alone is more than the 1.5x goal allows (%s of a %s budget).", ms(goStart), ms(budget))
	} else {
		w(" The 1.5x goal leaves %s beyond raw bwrap; the Go start takes %s of it, planning and the rest %s.",
			ms(budget), ms(goStart), ms(planning+rest))
	}
	if m.haveTiny() && m.tiny > 0 {
		w(" On the network path, init is sandbox-run-init, which links only init: %s in all, against %s for sandbox-run's own binary "+
			"as init (it saves %s); most of it is a Go runtime start inside the sandbox (%s, against %s for the tiny binary outside it), "+
			"and init's own work is %s.",
			ms(m.rawTiny-raw), ms(m.rawInit-raw), ms(m.rawInit-m.rawTiny), ms(m.rawNoop-raw), ms(m.tiny-m.plain), ms(m.rawTiny-m.rawNoop))
	}
	if floor := r.med(vFloor); floor > 0 {
		w(" The floor of this design, a Go launcher that only starts, fork-execs the same bwrap call with the trampoline's "+
			"ceiling line and waits, takes %s, **%.2fx raw bwrap**: the 1.5x goal leaves %s beyond it for all that sandbox-run does "+
			"besides (flags, detection, planning and its checks, the readback gate, the report, teardown), which takes %s here.",
			ms(floor), float64(floor)/float64(raw), ms(max(0, raw*3/2-floor)), ms(sr-floor))
	}
	w(" bwrap's own %s is the floor any launcher pays. "+
		"Each phase is a difference of two medians on a shared machine, so a phase of a millisecond or two is within the noise; "+
		"compare it with the min/max spread of section 1.\n\n", ms(raw-m.plain))
}
