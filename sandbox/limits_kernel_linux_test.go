package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bwmech "github.com/sandbox-run/sandbox-run/internal/mechanism/bwrap"

	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// limitProbe is one limit of the honest-limits table: how to set it, which
// enforcement the report may claim for it, a bounded command that exceeds
// it, and a check, given the claimed method, that the run was stopped the
// way that method stops it.
type limitProbe struct {
	name string // as in the report
	set  func(*policy.Policy)
	// methods the report may claim here; anything else is a lie.
	methods []string
	script  string
	// reached says, from the command's output, that it got past the limit
	// (used on the uncapped control, which must reach it).
	reached func(out string) bool
	check   func(t *testing.T, method string, o probeOutcome)
}

type probeOutcome struct {
	res    *Result
	err    error
	out    string
	stderr string // the command's, for a failure's message
}

// The values the table sets; the probes exceed them.
const (
	probeMemory  = 64 << 20
	probePids    = 20
	probeCPU     = time.Second
	probeNoFile  = 16
	probeFSize   = 64 << 10
	probeTimeout = 5 * time.Second
)

func limitProbes() []limitProbe {
	pidsMethods := []string{"cgroup", "sampled"}
	if limits.NProcPerUserNS() {
		pidsMethods = append(pidsMethods, "rlimit")
	}
	return []limitProbe{{
		name: "memory", set: func(p *policy.Policy) { p.Memory = probeMemory },
		methods: []string{"cgroup", "sampled"},
		// Four processes of 24 MiB: each under the limit (and under the
		// per-process RLIMIT_DATA backstop), the sum over it. Only a
		// whole-sandbox limit stops this.
		script:  `for i in 1 2 3 4; do python3 -c 'import time; b = bytearray(24 << 20); print("held", flush=True); time.sleep(3)' & done; wait`,
		reached: func(out string) bool { return strings.Count(out, "held") == 4 },
		check: func(t *testing.T, method string, o probeOutcome) {
			wantLimitExit(t, o, limits.MemoryLimit)
		},
	}, {
		name: "pids", set: func(p *policy.Policy) { p.Pids = probePids },
		methods: pidsMethods,
		script:  `i=0; while [ $i -lt 200 ]; do sleep 8 & i=$((i+1)); echo $i; done`,
		reached: func(out string) bool { return lastNumber(out) == 200 },
		check: func(t *testing.T, method string, o probeOutcome) {
			n := lastNumber(o.out)
			if n >= 200 {
				t.Fatalf("the fork loop started all %d processes under pids %d", n, probePids)
			}
			if method == "rlimit" {
				// The kernel refuses the fork: the shell's own failure,
				// never more tasks than the limit and the overhead.
				if n > probePids+bwmech.OverheadTasks || o.err != nil {
					t.Fatalf("started %d (limit %d + %d overhead), err %v", n, probePids, bwmech.OverheadTasks, o.err)
				}
				return
			}
			wantLimitExit(t, o, limits.PidsLimit)
		},
	}, {
		name: "cpu_time", set: func(p *policy.Policy) { p.CPUTime = policy.Duration(probeCPU) },
		methods: []string{"cgroup", "sampled"},
		// Three spinners of 0.6 s CPU each: every one under the
		// per-process RLIMIT_CPU, the sum over the sandbox's limit.
		script: `for i in 1 2 3; do python3 -c 'import time
while time.process_time() < 0.6: pass
print("spun", flush=True)' & done; wait`,
		reached: func(out string) bool { return strings.Count(out, "spun") == 3 },
		check: func(t *testing.T, method string, o probeOutcome) {
			e := wantLimitExit(t, o, limits.CpuLimit)
			if e != nil && time.Duration(e.Usage) < probeCPU {
				t.Errorf("CPU limit reported at %v, below the limit %v (not the sandbox's sum)", time.Duration(e.Usage), probeCPU)
			}
		},
	}, {
		name: "nofile", set: func(p *policy.Policy) { p.NoFile = probeNoFile },
		methods: []string{"rlimit"},
		script: `python3 -c '
import os
n = 0
try:
    while n < 200:
        os.open("/dev/null", 0); n += 1
    print("opened", n)
except OSError as e:
    print("errno", e.errno)
'`,
		reached: func(out string) bool { return strings.Contains(out, "opened 200") },
		check: func(t *testing.T, method string, o probeOutcome) {
			if !strings.Contains(o.out, "errno 24") || o.err != nil {
				t.Fatalf("want EMFILE (errno 24) below %d descriptors: %q, err %v", probeNoFile, o.out, o.err)
			}
		},
	}, {
		name: "fsize", set: func(p *policy.Policy) { p.FSize = probeFSize },
		methods: []string{"rlimit"},
		script:  `head -c 100000 /dev/zero > /tmp/big 2>/dev/null; echo size=$(wc -c < /tmp/big)`,
		reached: func(out string) bool { return strings.Contains(out, "size=100000") },
		check: func(t *testing.T, method string, o probeOutcome) {
			if !strings.Contains(o.out, fmt.Sprintf("size=%d", probeFSize)) || o.err != nil {
				t.Fatalf("want the file cut at %d bytes: %q, err %v", probeFSize, o.out, o.err)
			}
		},
	}, {
		name: "timeout", set: func(p *policy.Policy) { p.Timeout = policy.Duration(probeTimeout) },
		methods: []string{"timer"},
		script:  `sleep 8; echo slept`,
		reached: func(out string) bool { return strings.Contains(out, "slept") },
		check: func(t *testing.T, method string, o probeOutcome) {
			if o.err != nil || o.res == nil || o.res.ExitCode != ExitTimeout || o.res.Report.Exit == nil || o.res.Report.Exit.Class != report.ClassTimedOut {
				t.Fatalf("want exit 124, class timed_out and no error: res %+v err %v", o.res, o.err)
			}
		},
	}}
}

// wantLimitExit checks that the whole sandbox was ended for kind (a
// command that ran: no error, the limit's class and a reason), and
// returns the report's Exit.
func wantLimitExit(t *testing.T, o probeOutcome, kind limits.Kind) *report.Exit {
	t.Helper()
	if o.err != nil || o.res == nil || o.res.Report.Exit == nil {
		t.Fatalf("want the sandbox ended by %s: res %+v err %v, out %q, stderr %q", kind, o.res, o.err, o.out, o.stderr)
	}
	if e := o.res.Report.Exit; e.Class != mechanism.LimitClass(kind) || !strings.Contains(e.Reason, "exceeded") {
		t.Fatalf("report exit %+v, want class %s with its reason; out %q, stderr %q", e, mechanism.LimitClass(kind), o.out, o.stderr)
	}
	return o.res.Report.Exit
}

// lastNumber is the last line of out that is a number, -1 if none.
func lastNumber(out string) int {
	n := -1
	for _, l := range strings.Fields(out) {
		if v, err := strconv.Atoi(l); err == nil {
			n = v
		}
	}
	return n
}

// runProbe runs script under p and returns what it printed. Every probe
// is bounded: by its own loop counts, and by a 30 s deadline on ctx.
func runProbe(t *testing.T, p policy.Policy, script string) probeOutcome {
	t.Helper()
	return runProbeFor(t, p, script, InitBinary{}, 30*time.Second)
}

// runProbeInit is runProbe with ib as Options.Init.
func runProbeInit(t *testing.T, p policy.Policy, script string, ib InitBinary) probeOutcome {
	t.Helper()
	return runProbeFor(t, p, script, ib, 30*time.Second)
}

// runProbeFor is runProbeInit ended after d.
func runProbeFor(t *testing.T, p policy.Policy, script string, ib InitBinary, d time.Duration) probeOutcome {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errOut, err := os.CreateTemp(t.TempDir(), "err")
	if err != nil {
		t.Fatal(err)
	}
	defer errOut.Close()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	res, err := Run(ctx, p, []string{"sh", "-c", script}, Options{Stdout: out, Stderr: errOut, Init: ib})
	b, _ := os.ReadFile(out.Name())
	e, _ := os.ReadFile(errOut.Name())
	if len(e) > 2048 {
		e = e[len(e)-2048:]
	}
	return probeOutcome{res: res, err: err, out: string(b), stderr: string(e)}
}

// reported returns how the report says the named limit is held, "" if it
// is not listed.
func reported(r *Result, name string) (value, method string) {
	if r == nil {
		return "", ""
	}
	for _, l := range r.Report.Limits {
		if l.Name == name {
			return l.Value, l.Enforced
		}
	}
	return "", ""
}

// TestLimitsEnforcedAsReported is the honest-limits table: every limit
// alone and with each other one. For each run, the report's claim for every
// limit set must be one this host can hold, and the probe that exceeds the
// limit must be stopped the way the claim says. Control: without the limit
// (the process ceiling at its default) every probe reaches its target.
func TestLimitsEnforcedAsReported(t *testing.T) {
	sandboxtest.ProcessCount(t)
	sandboxtest.Bwrap(t)
	probes := limitProbes()
	for _, pr := range probes {
		t.Run("control/"+pr.name, func(t *testing.T) {
			o := runProbe(t, policy.Policy{Workdir: sandboxtest.WorkDir(t), Sandbox: policy.ModeBwrap}, pr.script)
			if !pr.reached(o.out) {
				t.Fatalf("untested: without the limit the probe does not reach its target: %q, err %v", o.out, o.err)
			}
		})
	}
	for i, pr := range probes {
		others := []*limitProbe{nil} // nil: alone
		for j := range probes {
			if j != i {
				others = append(others, &probes[j])
			}
		}
		for _, with := range others {
			name := pr.name + "/alone"
			if with != nil {
				name = pr.name + "/with_" + with.name
			}
			t.Run(name, func(t *testing.T) {
				p := policy.Policy{Workdir: sandboxtest.WorkDir(t), Sandbox: policy.ModeBwrap}
				set := []*limitProbe{&pr}
				pr.set(&p)
				if with != nil {
					with.set(&p)
					set = append(set, with)
					if with.name == "timeout" {
						// Beside another probe the timer must not be
						// what stops it, on a loaded machine either.
						p.Timeout = policy.Duration(25 * time.Second)
					}
				}
				o := runProbe(t, p, pr.script)
				if o.res == nil {
					t.Fatalf("no result: %v", o.err)
				}
				for _, s := range set {
					_, m := reported(o.res, s.name)
					if !slices.Contains(s.methods, m) {
						t.Errorf("report claims %s enforced by %q; this host can hold it only by %v", s.name, m, s.methods)
					}
				}
				_, method := reported(o.res, pr.name)
				pr.check(t, method, o)
			})
		}
	}
}

// TestDefaultProcessCeiling: with no limit flags a run has a process
// ceiling, policy.DefaultPids, reported with how it is held; a bounded fork
// loop (3000 processes, or a time bound) stops at it. Control: with the ceiling
// raised to 4000 the same loop reaches 3000.
func TestDefaultProcessCeiling(t *testing.T) {
	sandboxtest.ProcessCount(t)
	sandboxtest.Bwrap(t)
	// Tier 0's loop stops at 3000 processes or 80 s, whichever first.
	// Its children need no exec either: each is a subshell blocked
	// reading a FIFO in the workdir whose one writer is a sleep, all in
	// the command's group, which tier 0 ends (a loop of forked and exec'd
	// sleeps stopped at 1799 in 80 s at a load average of 25).
	//
	// Tier 0's ceiling is sampled, not held by the kernel: past 2000 the
	// loop pauses half a second every 100 forks, so that the 952 forks
	// between the ceiling and 3000 span several of the sampler's periods.
	// A sample of two thousand processes is slow on a loaded machine, and
	// the sampler is paced to a fifth of a CPU; without the pauses the
	// loop outran it once (CI's unprivileged lane beside the root lane).
	// What is tested is that the sampler ends a group over the ceiling,
	// which the report calls "sampled", not that it wins a race against
	// the fastest fork loop.
	loop := `f=$PWD/ceiling.fifo; mkfifo $f && { sleep 120 >$f & exec 3<$f; } || exit 1; ` +
		`i=0; end=$(( $(date +%s) + 80 )); while [ $i -lt 3000 ]; do { read x <&3; } & i=$((i+1)); case $i in *00) [ $i -lt 2000 ] || sleep 0.5; [ $(date +%s) -lt $end ] || break;; esac; echo $i; done`
	// Under bwrap the children need no exec: each is a subshell blocked
	// reading a FIFO in the sandbox's private /tmp, whose one writer is a
	// sleep; they end with the sandbox's PID namespace. A fork and an exec
	// of sleep cost three times as much, and on a slow, loaded machine
	// the loop of sleeps stopped at 2378 within the run's 30 s, short of the
	// control. 25 s was ample for these forks until a load average of 12
	// (parallel test binaries) stopped them at 1899: the bound is 60 s, and
	// the run's 75 s.
	forks := `f=/tmp/ceiling.fifo; mkfifo $f && { sleep 120 >$f & exec 3<$f; } || exit 1; ` +
		`i=0; end=$(( $(date +%s) + 60 )); while [ $i -lt 3000 ]; do { read x <&3; } & i=$((i+1)); case $i in *00) [ $(date +%s) -lt $end ] || break;; esac; echo $i; done`
	p := policy.Policy{Workdir: sandboxtest.WorkDir(t), Sandbox: policy.ModeBwrap}
	o := runProbeFor(t, p, forks, InitBinary{}, 75*time.Second)
	v, m := reported(o.res, "pids")
	if v != strconv.Itoa(policy.DefaultPids) || m == "" || m == "none" {
		t.Fatalf("report says pids %q by %q, want the default %d and how it is held", v, m, policy.DefaultPids)
	}
	n := lastNumber(o.out)
	if n < 0 || n >= 3000 || n > policy.DefaultPids+bwmech.OverheadTasks {
		t.Fatalf("the fork loop started %d processes under the default ceiling %d (method %s, err %v)", n, policy.DefaultPids, m, o.err)
	}
	if n < policy.DefaultPids-bwmech.OverheadTasks {
		t.Fatalf("untested: the fork loop stopped at %d, by its time bound, before the default ceiling %d (err %v)", n, policy.DefaultPids, o.err)
	}
	t.Logf("default ceiling %d (%s): the loop stopped at %d", policy.DefaultPids, m, n)

	// Control: the same loop with the ceiling at 4000 goes past the
	// default one, so the default, not the loop or the machine, stopped
	// it above. Past is enough: on a loaded machine the loop may reach its
	// time bound before 3000.
	p.Pids = 4000
	o = runProbeFor(t, p, forks, InitBinary{}, 75*time.Second)
	if n := lastNumber(o.out); n <= policy.DefaultPids+bwmech.OverheadTasks {
		t.Fatalf("untested: with the ceiling at 4000 the loop stopped at %d, not past the default %d (err %v)", n, policy.DefaultPids, o.err)
	}

	// Tier 0 has the same default, sampled (no user namespace of its
	// own for RLIMIT_NPROC), and ends the command's group at it.
	p = policy.Policy{Workdir: sandboxtest.WorkDir(t), Sandbox: policy.ModeOff}
	o = runProbeFor(t, p, loop, InitBinary{}, 90*time.Second)
	if v, m := reported(o.res, "pids"); v != strconv.Itoa(policy.DefaultPids) || m != "sampled" {
		t.Fatalf("tier 0 reports pids %q by %q, want %d sampled", v, m, policy.DefaultPids)
	}
	n = lastNumber(o.out)
	if n >= 3000 {
		t.Fatalf("tier 0: the loop started %d processes past the default ceiling", n)
	}
	if n < policy.DefaultPids-bwmech.OverheadTasks && o.res != nil && o.res.Report.Exit != nil && o.res.Report.Exit.Class != mechanism.LimitClass(limits.PidsLimit) {
		t.Fatalf("untested: tier 0's loop stopped at %d, by its time bound, before the default ceiling %d", n, policy.DefaultPids)
	}
	wantLimitExit(t, o, limits.PidsLimit)
}

// TestProcessCeilingOnEveryPath: the pids probe of the table stops at its
// ceiling on both of bwrap's paths, the fast path (the trampoline sets
// RLIMIT_NPROC) and init's (forwarding for the proxy: the sandbox's sh sets
// it on the way to the command, see initproc.SplitRlimits), this binary
// or sandbox-run-init being init, and the report says how it is held.
// Control: on the same path with the ceiling above the loop's 200, the
// loop reaches 200.
func TestProcessCeilingOnEveryPath(t *testing.T) {
	sandboxtest.ProcessCount(t)
	sandboxtest.Bwrap(t)
	var pr limitProbe
	for _, p := range limitProbes() {
		if p.name == "pids" {
			pr = p
		}
	}
	helper, id := sandboxtest.BuildInit(t)
	for _, path := range []struct {
		name  string
		hosts []string
		init  InitBinary
	}{
		{"fast", nil, InitBinary{}},
		{"init", []string{"example.com"}, InitBinary{}},
		{"sandbox-run-init", []string{"example.com"}, InitBinary{Path: helper, BuildID: id}},
	} {
		t.Run(path.name, func(t *testing.T) {
			p := policy.Policy{Workdir: sandboxtest.WorkDir(t), Sandbox: policy.ModeBwrap, AllowHosts: path.hosts, Pids: 300}
			if o := runProbeInit(t, p, pr.script, path.init); !pr.reached(o.out) {
				t.Fatalf("untested: with the ceiling at 300 the loop stopped at %d (err %v)", lastNumber(o.out), o.err)
			}
			pr.set(&p)
			o := runProbeInit(t, p, pr.script, path.init)
			_, method := reported(o.res, "pids")
			if !slices.Contains(pr.methods, method) {
				t.Fatalf("report claims pids enforced by %q; this host can hold it only by %v (err %v)", method, pr.methods, o.err)
			}
			pr.check(t, method, o)
		})
	}
}

// TestNProcCountsOnlyTheSandbox: the process ceiling held by RLIMIT_NPROC
// counts the sandbox's own tasks, not the host's processes of the same uid
// (the uid the sandbox runs as: 65534 under root, the caller otherwise),
// because it is set inside the sandbox's fresh user namespace. Control: the
// same RLIMIT_NPROC set outside a new user namespace counts those host
// processes and refuses the first fork.
func TestNProcCountsOnlyTheSandbox(t *testing.T) {
	sandboxtest.ProcessCount(t)
	sandboxtest.Bwrap(t)
	if !limits.NProcPerUserNS() {
		sandboxtest.Unavailable(t, "RLIMIT_NPROC per user namespace", "needs Linux 5.14 or later; older kernels sample pids")
	}
	uid := os.Getuid()
	cred := (*syscall.Credential)(nil)
	if uid == 0 {
		uid = policy.DefaultUID
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(policy.DefaultGID), Groups: []uint32{}}
	}
	// 40 host processes of the sandbox's uid, twice the ceiling below.
	const hostProcs = 40
	for range hostProcs {
		c := exec.Command("sleep", "60")
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	loop := `i=0; while [ $i -lt 100 ]; do sleep 8 & i=$((i+1)); echo $i; done`

	// Control: ulimit -u 20 in the host's user namespace, as that uid.
	c := exec.Command("sh", "-c", "ulimit -u 20 2>/dev/null || ulimit -p 20; "+loop)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	out, _ := c.Output()
	syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	if n := lastNumber(string(out)); n > 0 {
		t.Fatalf("untested: outside a user namespace RLIMIT_NPROC 20 let %d forks through despite %d processes of uid %d", n, hostProcs, uid)
	}

	p := policy.Policy{Workdir: sandboxtest.WorkDir(t), Sandbox: policy.ModeBwrap, Pids: probePids}
	// The command tries to raise the limit first: the hard limit is set
	// too, and raising it needs CAP_SYS_RESOURCE in the host's namespace.
	o := runProbe(t, p, "{ ulimit -u 5000 || ulimit -p 5000; } 2>/dev/null; "+loop)
	if _, m := reported(o.res, "pids"); m != "rlimit" {
		t.Skipf("pids held by %q here, not RLIMIT_NPROC", m)
	}
	n := lastNumber(o.out)
	if n < probePids-bwmech.OverheadTasks || n > probePids+bwmech.OverheadTasks {
		t.Fatalf("the sandbox started %d processes under pids %d with %d host processes of its uid: want about the limit", n, probePids, hostProcs)
	}
}
