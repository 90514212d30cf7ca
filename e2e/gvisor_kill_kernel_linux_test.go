package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestGvisorKilledLeavesNothing SIGKILLs sandbox-run in the middle of a
// tier-2 run and asserts that nothing of the run is left on the host:
// no process of it (runsc, its gofer and sandbox processes, the
// sandbox's ptrace stubs, the group guard, a runsc kill or delete), no
// namespace of its held by a process or a mount, no mount or cgroup
// naming it, and, once the next tier-2 run has swept, neither its
// runtime directory (bundle and runsc's state root) nor its protection
// journal. Three points: the command running; the same on the network
// path (--allow-host: the proxy, init's forwards, the TUN socket); and a
// --timeout's end, killed while sandbox-run's `runsc kill` or `runsc
// delete` runs.
//
// Controls: every check is first run on the live run and must find it
// (its processes, including runsc's sandbox process; its namespaces; at
// the timeout's end the runsc kill or delete itself), and the killed
// run's directory and journal must still be there before the next run
// sweeps. Measured before runsc's commands were started into a group
// guard (mechanism.GroupGuard): a kill at the timeout's end left the
// runsc delete running, reparented to PID 1, in 3 of 6 kills.
func TestGvisorKilledLeavesNothing(t *testing.T) {
	sandboxtest.Runsc(t)
	for _, tc := range []struct {
		name  string
		extra []string
		// atKill waits for the point to kill at; it returns the pids
		// that must be among the run's processes then (the control), or
		// false when the point was not reached.
		atKill func(t *testing.T, sbx int, w string) ([]int, bool)
		// early takes the run's processes while its command runs, before
		// the kill point, so that the kill follows the point at once: the
		// timeout's point is a runsc command's life, some 100 ms, which
		// walking /proc on a busy machine outlasted.
		early bool
	}{
		{"running", nil, commandStarted, false},
		{"network", []string{"--allow-host", "example.com"}, commandStarted, false},
		{"timeout's end", []string{"--timeout", "3s"}, runscHelperRuns, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The timeout's window is a runsc command's life (some
			// 100 ms): a poll that missed it retries, and three misses
			// fail rather than pass having tested nothing.
			for try := 1; ; try++ {
				if killGvisorRun(t, tc.extra, tc.atKill, tc.early) {
					return
				}
				if try == 3 {
					t.Fatalf("the kill point was not reached in %d runs", try)
				}
			}
		})
	}
}

// killGvisorRun is one run of TestGvisorKilledLeavesNothing; false when
// atKill's point was not reached (the run is killed and swept anyway).
// The test is the child subreaper of the run meanwhile: whatever of the
// run outlives sandbox-run is reparented to it, so that each such
// process is seen to end, and how.
func killGvisorRun(t *testing.T, extra []string, atKill func(*testing.T, int, string) ([]int, bool), early bool) bool {
	w, tmp, env := sandboxtest.WorkDir(t), gvTmp(t), cacheEnv(t)
	args := append(append([]string{"run", "--workdir", w, "--sandbox", "gvisor"}, extra...),
		"--", "sh", "-c", "echo up > started; sleep 60; :")
	c := exec.Command(bin, args...)
	c.Env = append(append(os.Environ(), "TMPDIR="+tmp), env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // its session is the run's alone
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unreap()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	defer c.Process.Kill()
	sbx := c.Process.Pid
	var dir, id string
	var procs map[int]runProc
	var nss map[string]bool
	snapshot := func() {
		dir = runDirOf(t, tmp)
		procs = gvRunProcesses(sbx, dir)
		nss, id = namespacesOf(procs), containerID(procs)
	}
	if early {
		commandStarted(t, sbx, w)
		snapshot()
	}
	must, reached := atKill(t, sbx, w)
	if early {
		addProcs(procs, must)
	} else {
		snapshot()
	}
	// A child that already ended (a zombie sandbox-run had not reaped
	// yet, such as a `runsc kill` that finished) did not outlive it.
	exited := zombies(procs, sbx)
	c.Process.Signal(syscall.SIGKILL)
	c.Wait()
	ended, left := reapRun(procs)
	if !reached || !outlived(must, ended) {
		return false
	}
	gvControls(t, procs, must, nss, id)
	if len(left) > 0 {
		t.Fatalf("sandbox-run SIGKILLed left %s", strings.Join(left, "; "))
	}
	for p, ws := range ended {
		// sandbox-run's own children must be killed with it; below them,
		// runsc's helpers may end by themselves at their parent's death
		// (runsc's `umount --sync-fd` exits at its sync pipe's end).
		if procs[p].ppid == sbx && !exited[p] && (!ws.Signaled() || ws.Signal() != syscall.SIGKILL) {
			t.Errorf("process %d that sandbox-run started (%s) outlived it and ended by itself (exit status %d): nothing killed it", p, procs[p].cmd, ws.ExitStatus())
		}
	}
	gvLeftover(t, dir, nss, id)
	gvSwept(t, w, tmp, dir, env)
	return true
}

// addProcs adds pids, found live at the kill point, to the run's
// processes.
func addProcs(procs map[int]runProc, pids []int) {
	for _, p := range pids {
		if st, ppid := startAndParent(p); st != "" {
			procs[p] = runProc{st, strings.ReplaceAll(readCmdline(p), "\x00", " "), ppid}
		}
	}
}

// outlived says whether every pid of must outlived sandbox-run (ended
// reparented to the test): a kill point whose process had ended before
// the kill tested nothing of it.
func outlived(must []int, ended map[int]syscall.WaitStatus) bool {
	for _, p := range must {
		if _, ok := ended[p]; !ok {
			return false
		}
	}
	return true
}

// gvLeftover fails for what of the killed run is still on the host once
// its processes are gone: a process naming its directory or in one of
// its namespaces (outside the test's tree), a mount, a cgroup.
func gvLeftover(t *testing.T, dir string, nss map[string]bool, id string) {
	t.Helper()
	for _, p := range append(processesWith(dir), inNamespaces(nss)...) {
		t.Errorf("a process of the killed run is left: %s cmdline %q", describe(p), readCmdline(p))
		// Never PID 1 nor the test, whatever the lists say: a kill here
		// must not reach beyond the run.
		if p > 1 && p != os.Getpid() {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	if m := mountsNaming(dir, nss); len(m) > 0 {
		t.Errorf("mounts of the killed run remain: %v", m)
	}
	if cg := cgroupsNaming(filepath.Base(dir), id); len(cg) > 0 {
		t.Errorf("cgroups of the killed run remain: %v", cg)
	}
}

// reapRun reaps, bounded, every process reparented to the test once
// sandbox-run died, until none is left (ECHILD): how each ended, by pid.
// Past the bound, what is still there is described and killed.
// zombies are the children of parent among procs that have ended and
// wait to be reaped (state Z).
func zombies(procs map[int]runProc, parent int) map[int]bool {
	z := map[int]bool{}
	for p, rp := range procs {
		if rp.ppid != parent {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			z[p] = true
		}
	}
	return z
}

func reapRun(procs map[int]runProc) (map[int]syscall.WaitStatus, []string) {
	ended := map[int]syscall.WaitStatus{}
	for deadline := time.Now().Add(10 * time.Second); ; {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.ECHILD):
			return ended, nil
		case pid > 0:
			ended[pid] = ws
			continue
		case time.Now().Before(deadline):
			time.Sleep(20 * time.Millisecond)
			continue
		}
		var left []string
		for _, p := range descendantsOf(os.Getpid()) {
			left = append(left, describe(p)+" cmdline "+strings.ReplaceAll(readCmdline(p), "\x00", " "))
			syscall.Kill(p, syscall.SIGKILL)
		}
		return ended, left
	}
}

// unreap ends the test's subreaping and reaps what came meanwhile.
func unreap() {
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	for {
		if pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); pid <= 0 || err != nil {
			return
		}
	}
}

// commandStarted waits until the command has written its file in w: the
// run is in its middle, runsc's sandbox and gofer up. The control:
// sandbox-run's children (the guard, runsc run) and runsc's sandbox
// process, which runsc moves to a session of its own.
func commandStarted(t *testing.T, sbx int, w string) ([]int, bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(w, "started")); err == nil {
			for _, p := range descendantsOf(sbx) {
				if strings.HasPrefix(readCmdline(p), "runsc-sandbox\x00") {
					return append(taskChildren(sbx), p), true
				}
			}
			t.Fatalf("control: no runsc-sandbox process below sandbox-run %d while its command runs", sbx)
		}
		if time.Now().After(deadline) || !running(sbx) {
			t.Fatalf("the command did not start within 30s (sandbox-run running: %v)", running(sbx))
		}
	}
}

// runscHelperRuns waits for the timeout's end: a `runsc kill` or
// `runsc delete` that sandbox-run started. The control: that command.
func runscHelperRuns(t *testing.T, sbx int, _ string) ([]int, bool) {
	t.Helper()
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline) && running(sbx); time.Sleep(2 * time.Millisecond) {
		for _, p := range taskChildren(sbx) {
			argv := strings.Split(readCmdline(p), "\x00")
			if strings.Contains(argv[0], "runsc") && (slices.Contains(argv, "kill") || slices.Contains(argv, "delete")) {
				return []int{p}, true
			}
		}
	}
	t.Logf("no runsc kill or delete of sandbox-run %d was seen", sbx)
	return nil, false
}

func readCmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return string(b)
}

// runDirOf is the one tier-2 runtime directory in tmp.
func runDirOf(t *testing.T, tmp string) string {
	t.Helper()
	dirs := runtimeDirs(t, tmp)
	if len(dirs) != 1 {
		t.Fatalf("want one tier-2 runtime directory in %s, found %v", tmp, dirs)
	}
	return dirs[0]
}

// runProc is one process of the run: its start time (a pid reused later
// is not the run's), its parent and its command line.
type runProc struct {
	start, cmd string
	ppid       int
}

// gvRunProcesses is every process of the run, by pid: sandbox-run's
// descendants (the guard, runsc and all it forked, the stubs without a
// command line included) and any process naming the run's directory.
func gvRunProcesses(sbx int, dir string) map[int]runProc {
	out := map[int]runProc{}
	for _, p := range append(descendantsOf(sbx), processesWith(dir)...) {
		if s, ppid := startAndParent(p); s != "" {
			out[p] = runProc{s, strings.ReplaceAll(readCmdline(p), "\x00", " "), ppid}
		}
	}
	return out
}

// descendantsOf lists every process below pid, through each thread's
// children.
func descendantsOf(pid int) []int {
	var out []int
	for todo := taskChildren(pid); len(todo) > 0; {
		p := todo[0]
		todo = append(todo[1:], taskChildren(p)...)
		out = append(out, p)
	}
	return out
}

// startAndParent is field 22 of /proc/PID/stat, and the parent's pid; ""
// when pid is gone or a zombie (dead, waiting for its reaper).
func startAndParent(pid int) (string, int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if err != nil || i < 0 {
		return "", 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" {
		return "", 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return f[19], ppid
}

// namespacesOf is the set of namespaces the run's processes hold alone
// ("net:[N]" as readlink spells them): every namespace of procs that no
// other process on the host is in. Comparing with the test's own
// namespaces is not enough: an earlier test of the suite may have moved
// the test process's main thread into a namespace of its own, and then
// the host's namespaces, which runsc's host-side processes are in, were
// taken for the run's, and gvLeftover killed every process on the host.
func namespacesOf(procs map[int]runProc) map[string]bool {
	kinds := []string{"net", "mnt", "pid", "user", "ipc", "uts"}
	out := map[string]bool{}
	for p := range procs {
		for _, kind := range kinds {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", p, kind)); err == nil {
				out[l] = true
			}
		}
	}
	for _, p := range procPIDs() {
		if _, ok := procs[p]; ok {
			continue
		}
		for _, kind := range kinds {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", p, kind)); err == nil {
				delete(out, l)
			}
		}
	}
	return out
}

// gvControls fails unless the checks found the live run: the pids the
// kill point named, a namespace of the run's own, and runsc's id of it.
func gvControls(t *testing.T, procs map[int]runProc, must []int, nss map[string]bool, id string) {
	t.Helper()
	if id == "" {
		t.Fatalf("control: no runsc command line of the run names its container (processes %v)", procs)
	}
	for _, p := range must {
		if _, ok := procs[p]; !ok {
			t.Fatalf("control: the run's process %d is not among those found %v", p, procs)
		}
	}
	if len(nss) == 0 {
		t.Fatalf("control: no namespace of the live run was found (processes %v)", procs)
	}
}

// inNamespaces lists the live processes in any of nss.
func inNamespaces(nss map[string]bool) []int {
	var out []int
	for _, p := range procPIDs() {
		for _, kind := range []string{"net", "mnt", "pid", "user", "ipc", "uts"} {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", p, kind)); err == nil && nss[l] && running(p) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// mountsNaming lists the host's mounts (this test's mount namespace)
// whose line names dir or one of nss (a namespace held by a bind of its
// nsfs file).
func mountsNaming(dir string, nss map[string]bool) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		hit := strings.Contains(l, dir)
		for ns := range nss {
			hit = hit || strings.Contains(l, ns)
		}
		if hit {
			out = append(out, l)
		}
	}
	return out
}

// containerID is runsc's id of the run's container: the last argument
// of runsc run, and of runsc kill and delete; "" when none was found.
func containerID(procs map[int]runProc) string {
	for p := range procs {
		argv := strings.Split(strings.TrimSuffix(readCmdline(p), "\x00"), "\x00")
		if id := argv[len(argv)-1]; strings.Contains(argv[0], "runsc") && strings.HasPrefix(id, "sandbox-run-") {
			return id
		}
	}
	return ""
}

// cgroupsNaming lists the cgroups (three levels down) whose name holds
// the run's directory's name or runsc's container id. Tier 2 runs runsc
// with --ignore-cgroups, so there is no positive control: this holds
// that a change that makes cgroups also removes them.
func cgroupsNaming(runDir, id string) []string {
	var out []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.Count(strings.TrimPrefix(p, "/sys/fs/cgroup"), "/") > 3 {
			return fs.SkipDir
		}
		if strings.Contains(d.Name(), runDir) || strings.Contains(d.Name(), id) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// gvSwept: the killed run's runtime directory and journal are still
// there (control), and the next tier-2 run on the same workdir, TMPDIR
// and cache removes both, leaving nothing of sandbox-run's in TMPDIR.
func gvSwept(t *testing.T, w, tmp, dir string, env []string) {
	t.Helper()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("control: the killed run's runtime directory is already gone (%v): the sweep would prove nothing", err)
	}
	journals := func() []string {
		m, _ := filepath.Glob(filepath.Join(strings.TrimPrefix(env[0], "XDG_CACHE_HOME="), "sandbox-run", "journals", "*.json"))
		return m
	}
	if len(journals()) == 0 {
		t.Fatal("control: the killed run left no journal: its removal would prove nothing")
	}
	r := runEnv(t, append([]string{"TMPDIR=" + tmp}, env...), "", "run", "--workdir", w, "--sandbox", "gvisor", "--", "true")
	if r.code != 0 {
		t.Fatalf("next run: exit %d: %s", r.code, r.stderr)
	}
	if left := runtimeDirs(t, tmp, true); len(left) > 0 {
		t.Errorf("the next run did not sweep %v", left)
	}
	if j := journals(); len(j) > 0 {
		t.Errorf("the next run left the killed run's journal: %v", j)
	}
}
