package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

func TestTimeoutKillsEveryDescendant(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	n := sleepMark(t, 8)
	start := time.Now()
	r := sandboxed(t, w, fmt.Sprintf(`setsid sleep %d.1 & (sleep %d.2 &) ; sleep 60`, n, n), "--timeout", "1s")
	if r.code != 124 {
		t.Fatalf("exit %d, want 124: %q", r.code, r.stderr)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("the timeout took %v", time.Since(start))
	}
	if !waitGone(fmt.Sprintf("sleep %d.", n), 5*time.Second) {
		t.Errorf("a descendant outlived the timeout")
	}
}

// limitRun runs script under extra limits and returns the result and the
// report's exit class.
func limitRun(t *testing.T, script string, extra ...string) (result, string) {
	t.Helper()
	w := sandboxtest.WorkDir(t)
	rep, r := runReport(t, w, extra, script)
	return r, rep.Exit.Class
}

func TestForkBombStopsAtPids(t *testing.T) {
	sandboxtest.ProcessCount(t)
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	start := time.Now()
	// Bounded: at most 2000 sleepers, each gone within 30 s anyway.
	rep, r := runReport(t, w, []string{"--pids", "50"}, `i=0; while [ $i -lt 2000 ]; do sleep 30 & i=$((i+1)); echo $i; done; wait`)
	method := ""
	for _, l := range rep.Limits {
		if l.Name == "pids" {
			method = l.Enforced
		}
	}
	started := 0
	for _, f := range strings.Fields(r.stdout) {
		if n, err := strconv.Atoi(f); err == nil {
			started = n
		}
	}
	switch method {
	case "rlimit":
		// The kernel refuses the 51st-odd fork (50 plus sandbox-run's
		// own few): the shell's fork fails, the sandbox is not ended.
		if started >= 2000 || started > 50+8 || !strings.Contains(r.stderr, "fork") {
			t.Errorf("started %d under --pids 50 (rlimit), exit %d (%q)", started, r.code, r.stderr)
		}
	case "cgroup", "sampled":
		if rep.Exit.Class != "pids_limit" || r.code != 137 {
			t.Errorf("exit %d class %q, want 137 PidsLimit (%q)", r.code, rep.Exit.Class, r.stderr)
		}
	default:
		t.Fatalf("pids reported enforced by %q", method)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("stopping the bomb took %v", d)
	}
	// The node is still responsive: a plain fork works at once.
	if err := exec.Command("true").Run(); err != nil {
		t.Errorf("host cannot fork after the bomb: %v", err)
	}
}

var usageRE = regexp.MustCompile(`\((\d+) MiB in use, limit (\d+) MiB\)`)

func TestMemoryLimits(t *testing.T) {
	needBwrap(t)
	for name, script := range map[string]string{
		"hog": `python3 -c '
a = []
for i in range(100):
    a.append(bytearray(10 << 20))
'`,
		// Four processes of 40 MiB each: every one under the limit, the
		// sum over it.
		"spread": `for i in 1 2 3 4; do python3 -c 'import time; b = bytearray(40 << 20); time.sleep(20)' & done; wait`,
	} {
		t.Run(name, func(t *testing.T) {
			r, class := limitRun(t, script, "--memory", "100M")
			if class != "memory_limit" || r.code != 137 {
				t.Fatalf("exit %d class %q, want 137 MemoryLimit (%q)", r.code, class, r.stderr)
			}
			m := usageRE.FindStringSubmatch(r.stderr)
			if m == nil {
				t.Fatalf("no usage in %q", r.stderr)
			}
			used, _ := strconv.Atoi(m[1])
			limit, _ := strconv.Atoi(m[2])
			if used >= 2*limit {
				t.Errorf("stopped at %d MiB, not before twice the limit (%d MiB)", used, limit)
			}
		})
	}
}

func TestCPUTimeLimit(t *testing.T) {
	needBwrap(t)
	start := time.Now()
	r, class := limitRun(t, `while :; do :; done`, "--cpu-time", "1s")
	if class != "cpu_limit" {
		t.Errorf("exit %d class %q, want CpuLimit (%q)", r.code, class, r.stderr)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("the spinner ran %v", time.Since(start))
	}
}

func TestFileLimits(t *testing.T) {
	needBwrap(t)
	script := `head -c 100000 /dev/zero > big 2>/dev/null; echo size=$(wc -c < big)
python3 -c '
import os
n = 0
try:
    while n < 200:
        os.open("/dev/null", 0); n += 1
except OSError as e:
    print("errno", e.errno)
'`
	// Positive control: without the limits the file is whole and the
	// opens go on.
	ctl, _ := limitRun(t, script)
	if !strings.Contains(ctl.stdout, "size=100000") || strings.Contains(ctl.stdout, "errno") {
		t.Fatalf("control: %q", ctl.stdout)
	}
	for _, mode := range []string{"bwrap", "off"} {
		r, class := limitRun(t, script, "--sandbox", mode, "--fsize", "64K", "--nofile", "16")
		if !strings.Contains(r.stdout, "size=65536") || !strings.Contains(r.stdout, "errno 24") || class != "exited" {
			t.Errorf("%s: want EFBIG at 64K and EMFILE (24): %q class %s", mode, r.stdout, class)
		}
	}
}

func TestOwnExitIsNotALimit(t *testing.T) {
	needBwrap(t)
	r, class := limitRun(t, "exit 3", "--memory", "100M", "--pids", "50", "--cpu-time", "5s")
	if r.code != 3 || class != "exited" || strings.Contains(r.stderr, "limit") {
		t.Errorf("exit %d class %q stderr %q, want the command's own 3", r.code, class, r.stderr)
	}
}

// TestMCPTimeout: sandbox-run mcp has no timer of its own any more;
// sandbox.Run's ends the server, and the relay exits 124 with one line.
// Control: without --timeout the same server is still running after the
// same delay.
func TestMCPTimeout(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	start := func(extra ...string) (*exec.Cmd, *strings.Builder, chan error) {
		args := append(append([]string{"mcp", "--workdir", w}, extra...), "--", "sh", "-c", "sleep 30")
		c := exec.Command(bin, args...)
		var stderr strings.Builder
		c.Stderr = &stderr
		// A client that stays connected: stdin open, nothing sent.
		if _, err := c.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill() })
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		return c, &stderr, done
	}
	// 5 s: a loaded machine can take over a second to set the sandbox up,
	// and the timer must fire while the server runs, not during set-up.
	_, stderr, done := start("--timeout", "5s")
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 124 || !strings.Contains(stderr.String(), "timed out after 5s") {
			t.Fatalf("mcp --timeout 5s: %v, stderr %q, want exit 124 and the timeout named", err, stderr.String())
		}
	case <-time.After(25 * time.Second):
		t.Fatal("mcp --timeout 5s still running after 25s")
	}
	_, _, done = start()
	select {
	case err := <-done:
		t.Fatalf("control: without --timeout the server ended: %v", err)
	case <-time.After(6 * time.Second):
	}
}

// TestPidsAboveHardLimit: sandbox-run's own hard RLIMIT_NPROC, which every
// process of the sandbox inherits, caps the ceiling: --pids above it is
// refused (125, one line), and the default comes down to it, reported at
// the value held. Control: the same --pids without that hard limit runs.
func TestPidsAboveHardLimit(t *testing.T) {
	sandboxtest.ProcessCount(t)
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	sh := func(hard string, args ...string) result {
		q := bin
		for _, a := range args {
			q += " '" + a + "'"
		}
		set := ""
		if hard != "" {
			// Soft and hard: the shell's own fork needs soft <= hard.
			set = "{ ulimit -u " + hard + " || ulimit -p " + hard + "; } 2>/dev/null && "
		}
		c := exec.Command("/bin/sh", "-c", set+"exec "+q)
		c.SysProcAttr = sandboxtest.OwnUserNS()
		var o, e strings.Builder
		c.Stdout, c.Stderr = &o, &e
		err := c.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{o.String(), e.String(), code}
	}
	rep := filepath.Join(sandboxtest.WorkDir(t), "r.json") // outside the writable workdir
	r := sh("200", "run", "--workdir", w, "--pids", "500", "--", "true")
	if r.code != 125 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "--pids 500 cannot be held") || !strings.Contains(r.stderr, "fix: pass --pids 192") {
		t.Errorf("--pids 500 under hard 200: exit %d %q, want 125 and one line", r.code, r.stderr)
	}
	r = sh("", "run", "--workdir", w, "--pids", "500", "--", "true")
	if r.code != 0 {
		t.Fatalf("control: --pids 500 without the hard limit: exit %d %q", r.code, r.stderr)
	}
	r = sh("200", "run", "--workdir", w, "--report", rep, "--", "sh", "-c", `grep "Max processes" /proc/self/limits`)
	if r.code != 0 || !strings.Contains(r.stdout, "200") {
		t.Fatalf("default under hard 200: exit %d out %q err %q", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(rep)
	if err != nil || !strings.Contains(string(b), `"name": "pids",
      "value": "192"`) {
		t.Errorf("report does not say pids 192: %s", b)
	}
}
