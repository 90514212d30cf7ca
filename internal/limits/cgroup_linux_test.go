package limits

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// baseEnv names an explicit cgroup base for the tests (--cgroup-base);
// without it they use what FindDelegated finds.
const baseEnv = "SANDBOX_RUN_TEST_CGROUP_BASE"

var cgroupSeq atomic.Int64

// testCgroup creates a cgroup for l under the delegated base, or marks the
// test unavailable with the evidence. The cgroup is closed, and checked to
// be gone, when the test ends.
func testCgroup(t *testing.T, l Limits) *Cgroup {
	t.Helper()
	base, err := FindDelegated(os.Getenv(baseEnv))
	if err != nil {
		sandboxtest.CgroupUnavailable(t, "delegated cgroup v2", err.Error())
		return nil
	}
	name := fmt.Sprintf("sandbox-run-test-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	c, err := Create(base, name, l)
	if errors.Is(err, ErrController) {
		sandboxtest.CgroupUnavailable(t, "cgroup v2 controllers", err.Error()+"; "+controllerEvidence(base))
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if _, err := os.Stat(c.Path()); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("cgroup %s still exists after Close: %v", c.Path(), err)
		}
	})
	return c
}

// controllerEvidence says why base lacks memory or pids: the controllers
// its hierarchy offers, and the cgroup v1 hierarchies that hold them.
func controllerEvidence(base string) string {
	avail, _ := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
	msg := fmt.Sprintf("%s/cgroup.controllers offers %q", base, strings.TrimSpace(string(avail)))
	if b, err := os.ReadFile("/proc/cgroups"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 4 && (f[0] == "memory" || f[0] == "pids") && f[1] != "0" {
				msg += fmt.Sprintf("; /proc/cgroups binds %s to cgroup v1 hierarchy %s", f[0], f[1])
			}
		}
	}
	return msg + " (a controller bound to a v1 hierarchy is unavailable to v2: boot with " +
		"systemd.unified_cgroup_hierarchy=1 or cgroup_no_v1=memory,pids, or run on a cgroup v2-only host)"
}

// inCgroup returns the SysProcAttr that starts a child directly in c.
func inCgroup(c *Cgroup) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: c.FD()}
}

func TestFindDelegatedRefusesNonCgroup(t *testing.T) {
	_, err := FindDelegated(t.TempDir())
	if !errors.Is(err, ErrNoCgroup) {
		t.Fatalf("FindDelegated(tmpdir) = %v, want ErrNoCgroup", err)
	}
}

func TestCreateRefusesBadNames(t *testing.T) {
	for _, name := range []string{"", ".", "..", "a/b", "../x", "cgroup.procs", "x\x00"} {
		if c, err := Create(t.TempDir(), name, Limits{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Create(%q) = %v, %v; want ErrInvalid", name, c, err)
		}
	}
}

// TestCgroupKillsEveryDescendant starts a tree with a setsid and a
// double-forked member in the cgroup via CLONE_INTO_CGROUP, and checks that
// Close kills all of it and removes the cgroup.
func TestCgroupKillsEveryDescendant(t *testing.T) {
	c := testCgroup(t, Limits{})
	ch := start(t, "", nil, inCgroup(c), "/bin/sh", "-c",
		"setsid sleep 20 & (sleep 20 &) ; sleep 20 & echo ready; wait")
	if l := ch.line(t); l != "ready" {
		t.Fatalf("sh: %q", l)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", ch.cmd.Process.Pid))
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(b)), "/"+filepath.Base(c.Path())) {
		t.Fatalf("child's /proc/PID/cgroup = %q, %v; want .../%s", b, err, filepath.Base(c.Path()))
	}
	var pids []int
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if pids, _ = c.Procs(); len(pids) >= 4 {
			break
		}
	}
	if len(pids) < 4 {
		t.Fatalf("cgroup.procs = %v, want the shell and three sleeps", pids)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ch.wait(t)
	for _, p := range pids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); err == nil && !strings.Contains(string(b), ") Z ") {
			t.Errorf("pid %d survived Close: %s", p, b)
		}
	}
}

func TestCgroupCPUTimeWatch(t *testing.T) {
	const limit = 300 * time.Millisecond
	c := testCgroup(t, Limits{CPUTime: limit})
	start(t, "spin", nil, inCgroup(c))
	x, ok := receive(t, c.Watch(t.Context(), 0), 5*time.Second)
	if !ok || x.Kind != CpuLimit || time.Duration(x.Usage) <= limit {
		t.Fatalf("Watch sent %+v (ok %v), want cpu_limit", x, ok)
	}
	if u, err := c.CPUTime(); err != nil || u < limit {
		t.Fatalf("CPUTime = %v, %v", u, err)
	}
}

func TestCgroupForkBombStopsAtPidsMax(t *testing.T) {
	sandboxtest.ProcessCount(t)
	const limit = 40
	c := testCgroup(t, Limits{Pids: limit})
	if b, err := os.ReadFile(filepath.Join(c.Path(), "pids.max")); err != nil || strings.TrimSpace(string(b)) != "40" {
		t.Fatalf("pids.max = %q, %v", b, err)
	}
	ch := start(t, "", nil, inCgroup(c), bomb(7)...)
	if l := ch.line(t); l != "ready" {
		t.Fatalf("bomb: %q", l)
	}
	watch := c.Watch(t.Context(), 0)
	// Sample for a second, and on until a fork was refused (at most 15 s):
	// on a loaded or emulated machine (make test-vm under TCG) the bomb
	// can take longer than a second to reach the limit.
	var peak int64
	start := time.Now()
	for ; time.Since(start) < 15*time.Second; time.Sleep(5 * time.Millisecond) {
		n, err := readInt(filepath.Join(c.Path(), "pids.current"))
		if err != nil {
			t.Fatal(err)
		}
		peak = max(peak, n)
		if e, err := c.Events(); err == nil && e.PidsMax > 0 && time.Since(start) > time.Second {
			break
		}
	}
	if peak > limit {
		t.Fatalf("pids.current reached %d over pids.max %d", peak, limit)
	}
	e, err := c.Events()
	if err != nil || e.PidsMax == 0 || e.Kind() != PidsLimit {
		t.Fatalf("Events = %+v, %v; want pids max > 0", e, err)
	}
	if x, ok := receive(t, watch, 2*time.Second); !ok || x.Kind != PidsLimit {
		t.Fatalf("Watch sent %+v (ok %v), want pids_limit", x, ok)
	}
	t.Logf("peak %d tasks, %d forks refused", peak, e.PidsMax)
}

func TestCgroupMemoryHogOOMKilled(t *testing.T) {
	const limit = 64 << 20
	c := testCgroup(t, Limits{Memory: limit})
	for file, want := range map[string]string{"memory.max": "67108864", "memory.oom.group": "1", "memory.swap.max": "0"} {
		b, err := os.ReadFile(filepath.Join(c.Path(), file))
		if file == "memory.swap.max" && errors.Is(err, fs.ErrNotExist) && swapTotal() == 0 {
			continue // no swap accounting and no swap: Create's documented exception
		}
		if err != nil || strings.TrimSpace(string(b)) != want {
			t.Fatalf("%s = %q, %v; want %s", file, b, err, want)
		}
	}
	// Bounded: the hog stops allocating at 512 MiB.
	ch := start(t, "hog", []string{mbEnv + "=512"}, inCgroup(c))
	watch := c.Watch(t.Context(), 0)
	ws := ch.wait(t)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("hog ended with %v, want SIGKILL by the OOM killer", ws)
	}
	e, err := c.Events()
	if err != nil || e.Kind() != MemoryLimit {
		t.Fatalf("Events = %+v, %v; want oom_kill", e, err)
	}
	if x, ok := receive(t, watch, 2*time.Second); !ok || x.Kind != MemoryLimit {
		t.Fatalf("Watch sent %+v (ok %v), want memory_limit", x, ok)
	}
	if k := Classify(Evidence{Signal: int(ws.Signal()), OOMKills: e.OOMKills + e.OOMGroupKills}); k != MemoryLimit {
		t.Fatalf("Classify = %v", k)
	}
}
