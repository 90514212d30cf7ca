//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// procInfo is what /proc says about one process.
type procInfo struct {
	pid, ppid int
	comm      string
	hwmKB     int64 // VmHWM: peak resident set
	rssKB     int64 // VmRSS
	threads   int
}

// readProc reads /proc/PID/stat and /proc/PID/status; ok is false when the
// process is gone (or is a zombie without memory).
func readProc(pid int) (procInfo, bool) {
	p := procInfo{pid: pid}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return p, false
	}
	s := string(b)
	i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || j < i {
		return p, false
	}
	p.comm = s[i+1 : j]
	f := strings.Fields(s[j+1:])
	if len(f) < 2 {
		return p, false
	}
	p.ppid, _ = strconv.Atoi(f[1])
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return p, false
	}
	for _, l := range strings.Split(string(st), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fs[0], 10, 64)
		switch k {
		case "VmHWM":
			p.hwmKB = n
		case "VmRSS":
			p.rssKB = n
		case "Threads":
			p.threads = int(n)
		}
	}
	return p, p.hwmKB > 0
}

// descendants is root and every process below it, from one scan of /proc.
func descendants(root int) []procInfo {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	all := map[int]procInfo{}
	kids := map[int][]int{}
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			all[pid] = p
			kids[p.ppid] = append(kids[p.ppid], pid)
		}
	}
	var out []procInfo
	queue := []int{root}
	for len(queue) > 0 && len(out) < 10000 {
		pid := queue[0]
		queue = queue[1:]
		if p, ok := all[pid]; ok {
			out = append(out, p)
		}
		queue = append(queue, kids[pid]...)
	}
	return out
}

// Roles of the processes of one run, as the memory table names them.
const (
	roleLauncher = "launcher"
	roleBwrap    = "bwrap"
	roleInit     = "in-sandbox init"
	roleHelpers  = "helpers (socat, shell)"
	roleCommand  = "the command (sleep)"
)

// roleOf classifies a process of a run rooted at root: the root is the
// launcher (sandbox-run, or node for srt); bwrap's processes; the command;
// sandbox-run's init is the child of bwrap that is not bwrap (its comm is
// the descriptor it was exec'd from); everything else (srt's socat
// bridges, the shell it wraps the command in) is a helper.
func roleOf(p procInfo, root int, byPID map[int]procInfo) string {
	switch {
	case p.pid == root:
		return roleLauncher
	case p.comm == "bwrap":
		return roleBwrap
	case p.comm == "sleep":
		return roleCommand
	case byPID[p.ppid].comm == "bwrap" && byPID[root].comm != "node":
		return roleInit
	}
	return roleHelpers
}

// memRun is one run's peak RSS per role (the sum over its processes) and
// the processes seen.
type memRun struct {
	kb    map[string]int64
	procs map[string][]string // role → "comm (N KiB)"
}

// measureMemory starts v (a `sleep` under a launcher), samples its
// process tree every 20 ms while it runs, and keeps each process's largest
// VmHWM. It reports per role.
func measureMemory(v variant) (memRun, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd, done := v.cmd(ctx)
	if done != nil {
		defer done()
	}
	var stderr strings.Builder
	cmd.Stderr = &limitedWriter{w: &stderr, n: 64 << 10}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return memRun{}, err
	}
	root := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	peak := map[int]procInfo{}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var werr error
loop:
	for i := 0; i < 5000; i++ {
		select {
		case werr = <-exited:
			break loop
		case <-tick.C:
		}
		for _, p := range descendants(root) {
			if q, ok := peak[p.pid]; !ok || p.hwmKB > q.hwmKB {
				peak[p.pid] = p
			}
		}
	}
	if werr != nil {
		return memRun{}, fmt.Errorf("%v: %s", werr, lastLines(stderr.String(), 5))
	}
	r := memRun{kb: map[string]int64{}, procs: map[string][]string{}}
	sawCmd := false
	for _, p := range peak {
		role := roleOf(p, root, peak)
		sawCmd = sawCmd || role == roleCommand
		r.kb[role] += p.hwmKB
		name := p.comm
		if role == roleInit {
			name = "sandbox-run init (comm " + p.comm + ": exec'd from a descriptor)"
		}
		r.procs[role] = append(r.procs[role], fmt.Sprintf("%s %d KiB", name, p.hwmKB))
	}
	if !sawCmd {
		return memRun{}, fmt.Errorf("the command was never seen running (samples: %d processes)", len(peak))
	}
	for _, l := range r.procs {
		slices.Sort(l)
	}
	return r, nil
}

// limitedWriter keeps the first n bytes.
type limitedWriter struct {
	w interface{ WriteString(string) (int, error) }
	n int
}

func (l *limitedWriter) Write(b []byte) (int, error) {
	if l.n > 0 {
		k := min(len(b), l.n)
		l.w.WriteString(string(b[:k]))
		l.n -= k
	}
	return len(b), nil
}

// Names of the memory variants.
const (
	memSR    = "sandbox-run run -- sleep"
	memSRNet = "sandbox-run run --allow-host X -- sleep"
	memSRT   = "srt -- sleep (no network)"
	memSRTNt = "srt (allowedDomains: [X]) -- sleep"
)

// memResults is section 6.
type memResults struct {
	runs   map[string][]memRun
	failed map[string]error // the last error of a variant
	misses map[string]int   // runs that failed (each variant keeps going)
	sleep  string
}

func (e *env) measureMemoryAll(srt *srtEnv, rounds int, deadline time.Time) *memResults {
	const sleep = "1"
	res := &memResults{runs: map[string][]memRun{}, failed: map[string]error{}, misses: map[string]int{}, sleep: sleep}
	vs := []variant{}
	add := func(name string, v variant) { v.name = name; vs = append(vs, v) }
	add(memSR, e.sandboxRun(nil, "/usr/bin/sleep", sleep))
	add(memSRNet, e.sandboxRun([]string{"--allow-host", "example.com"}, "/usr/bin/sleep", sleep))
	if srt != nil {
		add(memSRT, srt.run(srt.settingsNone, e.srtWork, "/usr/bin/sleep", sleep))
		add(memSRTNt, srt.run(srt.settingsExample, e.srtWork, "/usr/bin/sleep", sleep))
	}
	for r := 0; r < rounds; r++ {
		if r > 0 && time.Now().After(deadline) {
			break
		}
		for k := range vs {
			v := vs[(k+r)%len(vs)]
			if res.misses[v.name] >= 3 {
				continue
			}
			m, err := measureMemory(v)
			if err != nil {
				res.failed[v.name] = err
				res.misses[v.name]++
				fmt.Fprintf(os.Stderr, "bench: memory: %s: %v\n", v.name, err)
				continue
			}
			res.runs[v.name] = append(res.runs[v.name], m)
		}
	}
	return res
}

// medKB is the median over runs of one role's peak RSS; total sums every
// role but the command.
func (m *memResults) medKB(name, role string) int64 {
	var xs []float64
	for _, r := range m.runs[name] {
		if role == "total" {
			var t int64
			for k, v := range r.kb {
				if k != roleCommand {
					t += v
				}
			}
			xs = append(xs, float64(t))
			continue
		}
		xs = append(xs, float64(r.kb[role]))
	}
	return int64(median(xs))
}

func mib(kb int64) string {
	if kb == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f MiB", float64(kb)/1024)
}

func (r *report) memorySection(w func(string, ...any)) {
	w("## 6. Memory: peak RSS per process\n\n")
	m := r.mem
	if m == nil {
		w("Not measured in this run.\n\n")
		return
	}
	w("`sleep %s` under each launcher; the process tree below the launcher is sampled every 20 ms from /proc while it runs, "+
		"keeping each process's largest VmHWM (peak resident set, /proc/PID/status). Medians of %d interleaved runs per variant, "+
		"summed per role. RSS counts shared pages (the Go runtime's text, node's) in every process that maps them, so the totals "+
		"overstate what the machine spends, for both launchers alike.\n\n", m.sleep, maxRuns(m.runs))
	roles := []string{roleLauncher, roleBwrap, roleInit, roleHelpers, "total"}
	w("| variant | launcher | bwrap | in-sandbox init | helpers (socat, shell) | total (without the command) |\n|---|---:|---:|---:|---:|---:|\n")
	for _, name := range []string{memSR, memSRNet, memSRT, memSRTNt} {
		if len(m.runs[name]) == 0 {
			if err := m.failed[name]; err != nil {
				w("| %s | failed: %s | | | | |\n", name, oneLine(err.Error()))
			}
			continue
		}
		w("| %s |", name)
		for _, role := range roles {
			w(" %s |", mib(m.medKB(name, role)))
		}
		w("\n")
	}
	w("\n")
	if runs := m.runs[memSR]; len(runs) > 0 {
		w("Processes of one sandbox-run run: %s.", procList(runs[len(runs)-1]))
		if s := m.runs[memSRT]; len(s) > 0 {
			w(" Of one srt run: %s.", procList(s[len(s)-1]))
		}
		w("\n\n")
	}
	sr, srt := m.medKB(memSR, "total"), m.medKB(memSRT, "total")
	if sr > 0 && srt > 0 {
		w("sandbox-run's processes peak at **%s** together against srt's **%s** (%.1fx less). sandbox-run's launcher and its init are the "+
			"same Go binary, so each carries the Go runtime; srt's cost is mostly Node.js (the launcher) plus its proxies' bridges.\n\n",
			mib(sr), mib(srt), float64(srt)/float64(sr))
	}
	if len(m.failed) > 0 {
		w("Runs that gave no sample (a variant stops after 3; the medians above are of the others):\n\n")
		for _, name := range []string{memSR, memSRNet, memSRT, memSRTNt} {
			if err := m.failed[name]; err != nil {
				w("- %s: %d run(s); last: `%s`\n", name, m.misses[name], oneLine(err.Error()))
			}
		}
		w("\n")
	}
}

func procList(m memRun) string {
	var parts []string
	for _, role := range []string{roleLauncher, roleBwrap, roleInit, roleHelpers, roleCommand} {
		if l := m.procs[role]; len(l) > 0 {
			parts = append(parts, role+": "+strings.Join(l, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

func maxRuns(m map[string][]memRun) int {
	n := 0
	for _, v := range m {
		n = max(n, len(v))
	}
	return n
}

// memGoal is the summary row for section 6.
func (r *report) memGoal() ([3]string, bool) {
	m := r.mem
	if m == nil {
		return [3]string{}, false
	}
	sr := m.medKB(memSR, "total")
	if sr == 0 {
		return [3]string{}, false
	}
	got := fmt.Sprintf("launcher %s, init %s, total %s", mib(m.medKB(memSR, roleLauncher)), mib(m.medKB(memSR, roleInit)), mib(sr))
	if srt := m.medKB(memSRT, "total"); srt > 0 {
		got += fmt.Sprintf("; srt total %s (%.1fx)", mib(srt), float64(srt)/float64(sr))
	}
	return [3]string{"memory: peak RSS of sandbox-run's processes vs srt's (no goal set)", got, "—"}, true
}
