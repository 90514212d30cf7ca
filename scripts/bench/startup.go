//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/sandbox-run/sandbox-run/filter"
	"github.com/sandbox-run/sandbox-run/landlock"
)

// variant is one command whose start-up is measured. cmd returns a fresh
// command each time, and a function to call after it ended.
type variant struct {
	name string
	cmd  func(ctx context.Context) (*exec.Cmd, func())
	// every > 1 runs the variant only in rounds 0, every, 2*every, ...:
	// for the 1000-bind points, whose start takes seconds (bwrap's own
	// mount set-up grows faster than linearly).
	every int
}

// runTimeout bounds one start of one variant; a start that takes longer is
// a failure, not a measurement.
const runTimeout = 60 * time.Second

// interleave runs every variant once per round, rounds times, rotating the
// order each round (A B C, B C A, ...), and returns the wall times per
// variant. It stops early, after a full round, when the deadline has
// passed. A variant that fails is dropped from the remaining rounds and
// its error returned in failed.
func interleave(vs []variant, rounds int, deadline time.Time) (times map[string]sample, failed map[string]error) {
	times = map[string]sample{}
	failed = map[string]error{}
	for r := 0; r < rounds; r++ {
		if r > 0 && time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "bench: time bound reached after %d rounds\n", r)
			break
		}
		for k := range vs {
			v := vs[(k+r)%len(vs)]
			if failed[v.name] != nil || (v.every > 1 && r%v.every != 0) {
				continue
			}
			d, err := timeOnce(v)
			if err != nil {
				failed[v.name] = err
				fmt.Fprintf(os.Stderr, "bench: %s: %v\n", v.name, err)
				continue
			}
			times[v.name] = append(times[v.name], d)
		}
	}
	return times, failed
}

func timeOnce(v variant) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd, done := v.cmd(ctx)
	if done != nil {
		defer done()
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, strings.TrimSpace(lastLines(stderr.String(), 5)))
	}
	return d, nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// sandboxRun is `sandbox-run run --workdir W EXTRA... -- ARGV...`.
func (e *env) sandboxRun(extra []string, argv ...string) variant {
	return e.sandboxRunIn(e.work, extra, argv...)
}

// sandboxRunIn is sandboxRun with the workdir work.
func (e *env) sandboxRunIn(work string, extra []string, argv ...string) variant {
	args := append([]string{"run", "--workdir", work}, extra...)
	args = append(append(args, "--"), argv...)
	return variant{cmd: func(ctx context.Context) (*exec.Cmd, func()) {
		return exec.CommandContext(ctx, e.bin, args...), nil
	}}
}

// rawBwrap derives the raw bwrap call equivalent to `sandbox-run run
// EXTRA -- /usr/bin/true` from sandbox-run's --dry-run output: the same
// namespaces, mounts (by path instead of by descriptor), environment,
// /proc hardening and seccomp program (passed on fd 3), minus sandbox-run's
// init and its control fds. Run as root, it starts bwrap as the same
// unprivileged uid sandbox-run uses.
func (e *env) rawBwrap(extra []string) (variant, error) {
	_, argv, err := e.dryRaw(extra)
	if err != nil {
		return variant{}, err
	}
	// --seccomp FD goes before the "--" that ends bwrap's options.
	argv = append(argv[:len(argv)-2], "--seccomp", "3", "--", "/usr/bin/true")
	return variant{cmd: func(ctx context.Context) (*exec.Cmd, func()) {
		c := exec.CommandContext(ctx, argv[0], argv[1:]...)
		c.Env = []string{}
		if os.Geteuid() == 0 {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		}
		f := e.openSeccomp()
		c.ExtraFiles = []*os.File{f}
		return c, func() { f.Close() }
	}}, nil
}

// dryRaw runs `sandbox-run run --dry-run EXTRA -- /usr/bin/true` and
// returns its output and the raw bwrap argv it gives (rawArgs).
func (e *env) dryRaw(extra []string) ([]byte, []string, error) {
	args := append([]string{"run", "--workdir", e.work, "--dry-run"}, extra...)
	args = append(args, "--", "/usr/bin/true")
	dry, err := exec.Command(e.bin, args...).Output()
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox-run --dry-run: %w", err)
	}
	argv, err := rawArgs(dry)
	return dry, argv, err
}

// openSeccomp opens the seccomp program setup wrote, for a variant's fd 3.
func (e *env) openSeccomp() *os.File {
	f, err := os.Open(e.seccomp)
	if err != nil {
		panic(err) // written by setup; its absence is a bug of this program
	}
	return f
}

// rawArgs turns sandbox-run's dry-run output into a raw bwrap argv ending
// in "-- /usr/bin/true": descriptor binds become path binds; sandbox-run's
// own control fds (--info-fd, --seccomp) and its init are dropped.
func rawArgs(dry []byte) ([]string, error) {
	var argv0 string
	var stream []string
	fds := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(dry))
	sc.Buffer(nil, 1<<20)
	section := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "argv: "):
			argv0 = strings.Fields(strings.TrimPrefix(line, "argv: "))[0]
		case strings.HasPrefix(line, "args stream"):
			section = "args"
		case strings.HasPrefix(line, "descriptors"):
			section = "fds"
		case section == "args" && strings.HasPrefix(line, "  "):
			stream = append(stream, unquote(strings.TrimPrefix(line, "  ")))
		case section == "fds" && strings.HasPrefix(line, "  "):
			if f := strings.SplitN(strings.TrimSpace(line), " = ", 2); len(f) == 2 {
				fds[f[0]] = f[1]
			}
		}
	}
	if argv0 == "" || len(stream) == 0 {
		return nil, fmt.Errorf("dry run output without argv or args stream:\n%s", dry)
	}
	out := []string{argv0}
	for i := 0; i < len(stream); i++ {
		switch a := stream[i]; a {
		case "--ro-bind-fd", "--bind-fd":
			if i+2 >= len(stream) {
				return nil, fmt.Errorf("dry run: %s without its operands", a)
			}
			src, ok := fds[stream[i+1]]
			if !ok {
				return nil, fmt.Errorf("dry run names fd %s without a source", stream[i+1])
			}
			out = append(out, strings.TrimSuffix(a, "-fd"), src, stream[i+2])
			i += 2
		case "--info-fd", "--seccomp":
			i++
		default:
			out = append(out, a)
		}
	}
	return append(out, "--", "/usr/bin/true"), nil
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], `'\''`, "'")
	}
	return s
}

// writeSeccomp writes the seccomp program sandbox-run loads for a default
// policy to path, for the raw bwrap calls.
func writeSeccomp(path string) error {
	arch, err := filter.NativeArch()
	if err != nil {
		return err
	}
	prog, err := filter.Assemble(arch, filter.Options{})
	if err != nil {
		return err
	}
	return os.WriteFile(path, prog.Bytes(), 0o644)
}

// sparseEvery: the 1000-bind points run in every 6th round only (5 runs
// in 25 rounds), each start taking seconds.
const sparseEvery = 6

// growth sizes: binds and protected paths, and allow-list entries.
var (
	bindCounts  = []int{1, 10, 100, 1000}
	allowCounts = []int{1, 10, 100}
)

// readFlags is --read for the first n files of e.ro.
func (e *env) readFlags(n int) []string {
	var f []string
	for i := 0; i < n; i++ {
		f = append(f, "--read", filepath.Join(e.ro, fmt.Sprintf("r%04d", i)))
	}
	return f
}

// protectFlags is --protect for the first n files the workdir holds.
func protectFlags(n int) []string {
	var f []string
	for i := 0; i < n; i++ {
		f = append(f, "--protect", fmt.Sprintf("p%04d", i))
	}
	return f
}

func allowFlags(n int) []string {
	var f []string
	for i := 0; i < n; i++ {
		f = append(f, "--allow-host", fmt.Sprintf("h%03d.example.com", i))
	}
	return f
}

// Names of the start-up variants, as they appear in the report.
const (
	vPlain   = "plain exec"
	vRaw     = "raw bwrap (same namespaces, mounts, seccomp)"
	vSR      = "sandbox-run run"
	vSRNet   = "sandbox-run run --allow-host X (proxy + forwarder)"
	vSRVer   = "sandbox-run version (process start only)"
	vSROff   = "sandbox-run run --sandbox off (no bwrap)"
	vSRBig   = "sandbox-run run, in a workdir of 10,000 more files (100 directories of 100, beside a .git)"
	vSRLL    = "sandbox-run run --sandbox landlock (no namespaces)"
	vSRT     = "srt (no network)"
	vSRTNet  = "srt (allowedDomains: [X])"
	vCodex   = "codex sandbox -P :workspace (no network)"
	vSRBinds = "sandbox-run, %d --read"
	vRawRead = "raw bwrap, %d read binds"
	vSRProt  = "sandbox-run, %d --protect"
	vRawProt = "raw bwrap, %d protect binds"
	vSRAllow = "sandbox-run, %d --allow-host"
	vRunscDo = "runsc do true (gVisor's quick mode, --network=none)"
	vSRGv    = "sandbox-run run --sandbox gvisor (tier 2)"
)

// startupVariants is every start-up variant: the main table and, unless
// quick, the growth series.
func (e *env) startupVariants(quick bool, srt *srtEnv, codex *codexEnv) ([]variant, error) {
	var vs []variant
	add := func(name string, v variant) {
		v.name = name
		vs = append(vs, v)
	}
	every := 1 // of the growth point being added
	addRaw := func(name string, extra []string) error {
		v, err := e.rawBwrap(extra)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		v.every = every
		add(name, v)
		return nil
	}
	addSR := func(name string, extra []string) {
		v := e.sandboxRun(extra, "/usr/bin/true")
		v.every = every
		add(name, v)
	}
	add(vPlain, variant{cmd: func(ctx context.Context) (*exec.Cmd, func()) {
		return exec.CommandContext(ctx, "/usr/bin/true"), nil
	}})
	if err := addRaw(vRaw, nil); err != nil {
		return nil, err
	}
	add(vSR, e.sandboxRun(nil, "/usr/bin/true"))
	add(vSRNet, e.sandboxRun([]string{"--allow-host", "example.com"}, "/usr/bin/true"))
	add(vSRVer, variant{cmd: func(ctx context.Context) (*exec.Cmd, func()) {
		return exec.CommandContext(ctx, e.bin, "version"), nil
	}})
	add(vSROff, e.sandboxRun([]string{"--sandbox", "off"}, "/usr/bin/true"))
	add(vSRBig, e.sandboxRunIn(e.bigWork, nil, "/usr/bin/true"))
	if runsc, err := exec.LookPath("runsc"); err == nil {
		// Tier 2 against gVisor's own quickest start of the same command:
		// the goal is within 1.3x of it.
		add(vRunscDo, e.runscDo(runsc))
		add(vSRGv, e.sandboxRun([]string{"--sandbox", "gvisor"}, "/usr/bin/true"))
		vs = append(vs, e.imageStartups()...)
	}
	if abi, err := llsys.LandlockGetABIVersion(); err == nil && abi >= landlock.MinABI {
		add(vSRLL, e.sandboxRun([]string{"--sandbox", "landlock"}, "/usr/bin/true"))
	}
	if srt != nil {
		add(vSRT, srt.run(srt.settingsNone, e.srtWork, "/usr/bin/true"))
		add(vSRTNet, srt.run(srt.settingsExample, e.srtWork, "/usr/bin/true"))
	}
	if codex != nil {
		add(vCodex, codex.run(e.srtWork, "/usr/bin/true"))
	}
	counts := bindCounts
	if quick {
		counts = []int{1, 100}
	}
	for _, n := range counts {
		every = 1
		if n >= 1000 {
			every = sparseEvery
		}
		if err := addRaw(fmt.Sprintf(vRawRead, n), e.readFlags(n)); err != nil {
			return nil, err
		}
		addSR(fmt.Sprintf(vSRBinds, n), e.readFlags(n))
		if err := addRaw(fmt.Sprintf(vRawProt, n), protectFlags(n)); err != nil {
			return nil, err
		}
		addSR(fmt.Sprintf(vSRProt, n), protectFlags(n))
	}
	every = 1
	ac := allowCounts
	if quick {
		ac = []int{1, 100}
	}
	for _, n := range ac {
		add(fmt.Sprintf(vSRAllow, n), e.sandboxRun(allowFlags(n), "/usr/bin/true"))
	}
	return vs, nil
}

// extraSeries is the variants that run more rounds of their own, because
// a goal compares them by a difference of medians: raw bwrap, sandbox-run
// run and its --allow-host X (the start-up ratio and the network's added
// milliseconds), and the --read and --protect series below the sparse
// 1000-bind points (whose per-bind figures divide a difference by 99).
func extraSeries(vs []variant) []variant {
	var out []variant
	for _, v := range vs {
		switch v.name {
		case vRaw, vSR, vSRNet:
			out = append(out, v)
			continue
		}
		for _, n := range bindCounts {
			if n >= 1000 {
				continue
			}
			switch v.name {
			case fmt.Sprintf(vRawRead, n), fmt.Sprintf(vSRBinds, n), fmt.Sprintf(vRawProt, n), fmt.Sprintf(vSRProt, n):
				out = append(out, v)
			}
		}
	}
	return out
}

// runscDo is `runsc --network=none --ignore-cgroups [--rootless] --root
// DIR do /usr/bin/true` with a fresh state root per start.
func (e *env) runscDo(runsc string) variant {
	return variant{cmd: func(ctx context.Context) (*exec.Cmd, func()) {
		root, err := os.MkdirTemp("", "sbx-bench-runsc-")
		if err != nil {
			root = os.TempDir()
		}
		args := []string{"--network=none", "--ignore-cgroups", "--root", root}
		if os.Geteuid() != 0 {
			args = append(args, "--rootless")
		}
		args = append(args, "do", "/usr/bin/true")
		return exec.CommandContext(ctx, runsc, args...), func() { os.RemoveAll(root) }
	}}
}
