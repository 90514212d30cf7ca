package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// marked returns the pids of the host's processes whose argv holds marker.
func marked(marker string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			out = append(out, pid)
		}
	}
	return out
}

// goneWithin waits (bounded) for every process carrying marker to be gone;
// the kernel ends a PID namespace's processes as its PID 1 dies, and they
// may take a moment to be reaped.
func goneWithin(marker string, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		left := marked(marker)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunEnforcesTimeout: sandbox.Run, called as a library (no CLI), ends
// the command and everything it started when Policy.Timeout passes, returns
// exit status 124 with class timed_out, and its report names the timer.
// Control: without a timeout the same command outlives the same delay and
// keeps its own status; a deadline of the caller's own ctx is not a
// TimeoutError.
func TestRunEnforcesTimeout(t *testing.T) {
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	for _, mode := range []policy.Mode{policy.ModeBwrap, policy.ModeOff} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == policy.ModeBwrap {
				sandboxtest.Bwrap(t)
			}
			w := sandboxtest.WorkDir(t)
			// A sleep whose argument no other process has: found by argv.
			marker := fmt.Sprintf("3600.%d%d", os.Getpid(), time.Now().UnixNano()%1e6)
			// Tier 0 promises only the command's process group: no setsid.
			script := "sleep " + marker + " & setsid sleep " + marker + " & sleep " + marker
			if mode == policy.ModeOff {
				script = "sleep " + marker + " & sleep " + marker
			}
			p := policy.Policy{Workdir: w, Sandbox: mode, Timeout: policy.Duration(3 * time.Second)} // room for a loaded set-up: the timer must fire after the start
			// Bounds the test should Run ignore the timeout.
			bound, cancelBound := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancelBound()
			start := time.Now()
			res, err := Run(bound, p, []string{"sh", "-c", script}, Options{Stdout: null, Stderr: null})
			took := time.Since(start)
			if err != nil {
				t.Fatalf("err = %v, want none: the command ran, its report's exit says how it ended", err)
			}
			if res == nil || res.ExitCode != ExitTimeout {
				t.Fatalf("result %+v, want exit %d", res, ExitTimeout)
			}
			if took < 3*time.Second || took > 15*time.Second {
				t.Errorf("Run returned after %v, want the 3s timeout (bounded at 15s)", took)
			}
			if e := res.Report.Exit; e == nil || e.Code != ExitTimeout || e.Class != report.ClassTimedOut || !strings.Contains(e.Reason, "timed out after 3s") {
				t.Errorf("report exit %+v, want code 124 class timed_out with its reason", e)
			}
			found := false
			for _, l := range res.Report.Limits {
				found = found || (l.Name == "timeout" && l.Enforced == "timer" && l.Value == "3s")
			}
			if !found {
				t.Errorf("report limits %+v: no timeout 3s enforced by timer", res.Report.Limits)
			}
			if left := goneWithin(marker, 3*time.Second); len(left) > 0 {
				t.Errorf("processes of the timed-out run survive: %v", left)
			}

			// Control: no timeout; the command outlives 3s and exits 3.
			p.Timeout = 0
			start = time.Now()
			res, err = Run(t.Context(), p, []string{"sh", "-c", "sleep 3.5; exit 3"}, Options{Stdout: null, Stderr: null})
			if err != nil || res.ExitCode != 3 || time.Since(start) < 3500*time.Millisecond {
				t.Fatalf("control without timeout: res %+v err %v after %v, want exit 3 after 3.5s", res, err, time.Since(start))
			}
			for _, l := range res.Report.Limits {
				if l.Name == "timeout" {
					t.Errorf("control reports a timeout it does not have: %+v", l)
				}
			}

			// The caller's own deadline ends the run too, but it is the
			// caller's: class cancelled, no 124.
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			res, err = Run(ctx, p, []string{"sh", "-c", "sleep " + marker}, Options{Stdout: null, Stderr: null})
			if err != nil || res == nil || res.Report.Exit == nil || res.Report.Exit.Class != report.ClassCancelled {
				t.Errorf("caller's deadline: res %+v err %v, want class cancelled and no error", res, err)
			}
			if res != nil && res.ExitCode == ExitTimeout {
				t.Errorf("caller's deadline turned into exit 124")
			}
			if left := goneWithin(marker, 3*time.Second); len(left) > 0 {
				t.Errorf("processes of the cancelled run survive: %v", left)
			}
		})
	}
}
