package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// gvTmp is a TMPDIR of the test's own, reachable by the sandbox's uid, so
// that the runtime directories of tier-2 runs can be counted.
func gvTmp(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "sbx-gv-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	os.Chmod(d, 0o755)
	return d
}

// runtimeDirs lists the tier-2 runtime directories in tmp; with all, every
// directory of sandbox-run's there (the proxy's and init's sockets too).
func runtimeDirs(t *testing.T, tmp string, all ...bool) []string {
	t.Helper()
	pattern := "sandbox-run-gvisor-*"
	if len(all) > 0 && all[0] {
		pattern = "sandbox-run-*"
	}
	m, err := filepath.Glob(filepath.Join(tmp, pattern))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGvisorCLI: `run --sandbox gvisor` through the binary: the command's
// output and status, a report that says tier 2 and what the kernel said
// from inside, and nothing left in TMPDIR.
func TestGvisorCLI(t *testing.T) {
	sandboxtest.Runsc(t)
	w, tmp := sandboxtest.WorkDir(t), gvTmp(t)
	rep := filepath.Join(t.TempDir(), "report.json")
	r := runEnv(t, []string{"TMPDIR=" + tmp}, "in", "run", "--workdir", w, "--sandbox", "gvisor", "--report", rep, "--",
		"sh", "-c", "cat; echo; dmesg | head -1; exit 5")
	if r.code != 5 || !strings.Contains(r.stdout, "in\n") || !strings.Contains(r.stdout, "gVisor") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var report struct {
		Tier      int    `json:"tier"`
		Mechanism string `json:"mechanism"`
		Gvisor    struct {
			Version string `json:"version"`
		} `json:"gvisor"`
		Readback struct {
			Kernel struct {
				Dmesg string `json:"dmesg"`
			} `json:"kernel"`
		} `json:"readback"`
	}
	b, err := os.ReadFile(rep)
	if err == nil {
		err = json.Unmarshal(b, &report)
	}
	if err != nil {
		t.Fatal(err)
	}
	if report.Tier != 2 || report.Mechanism != "gvisor" || report.Gvisor.Version == "" || !strings.Contains(report.Readback.Kernel.Dmesg, "gVisor") {
		t.Errorf("report: %s", b)
	}
	if left := runtimeDirs(t, tmp, true); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	// Control: the same dmesg line is not gVisor's outside.
	if r := unconfined(t, w, "dmesg 2>/dev/null | head -1"); strings.Contains(r.stdout, "gVisor") {
		t.Errorf("control: the host's log names gVisor: %q", r.stdout)
	}
}

// runscProcesses lists the processes whose command line names dir: runsc
// and its sandbox and gofer carry the run's state root on theirs.
func runscProcesses(dir string) []int { return processesWith(dir) }

// TestGvisorKilledCleanup: SIGKILL of sandbox-run ends the sandbox (runsc
// and its sandbox and gofer processes), and the next run removes the
// runtime directory the killed one could not. Control: while the run
// lives, its runsc processes are found by the same search.
func TestGvisorKilledCleanup(t *testing.T) {
	sandboxtest.Runsc(t)
	w, tmp := sandboxtest.WorkDir(t), gvTmp(t)
	c := exec.Command(bin, "run", "--workdir", w, "--sandbox", "gvisor", "--", "sh", "-c", "echo up > started; sleep 60; :")
	c.Env = append(os.Environ(), "TMPDIR="+tmp)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	defer c.Process.Kill()
	var dirs []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		dirs = runtimeDirs(t, tmp)
		if _, err := os.Stat(filepath.Join(w, "started")); err == nil && len(dirs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command did not start; runtime dirs %v", dirs)
		}
	}
	if len(runscProcesses(dirs[0])) == 0 {
		t.Fatal("control: no runsc process names the run's runtime dir while it runs")
	}
	c.Process.Signal(syscall.SIGKILL)
	c.Wait()
	for deadline := time.Now().Add(10 * time.Second); len(runscProcesses(dirs[0])) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("runsc processes outlived sandbox-run: %v", runscProcesses(dirs[0]))
		}
	}
	if _, err := os.Stat(dirs[0]); err != nil {
		t.Fatalf("control: the killed run's runtime dir is already gone (%v): the sweep below would prove nothing", err)
	}
	if r := runEnv(t, []string{"TMPDIR=" + tmp}, "", "run", "--workdir", w, "--sandbox", "gvisor", "--", "true"); r.code != 0 {
		t.Fatalf("next run: exit %d: %s", r.code, r.stderr)
	}
	if left := runtimeDirs(t, tmp, true); len(left) > 0 {
		t.Errorf("the next run did not sweep %v", left)
	}
}
