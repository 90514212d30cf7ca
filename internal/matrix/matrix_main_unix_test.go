//go:build linux || darwin

package matrix

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// bin is the sandbox-run binary built for this test run: the matrix runs
// through the binary, as on a node.
var bin string

func TestMain(m *testing.M) {
	dirsCleanup, err := sandboxtest.PrivateUserDirs("sbx-check-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrix: private cache and state directories:", err)
		os.Exit(1)
	}
	b, cleanup, err := sandboxtest.BuildSandboxRun("sbx-check-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrix: building sandbox-run:", err)
		dirsCleanup()
		os.Exit(1)
	}
	bin = b
	code := m.Run()
	cleanup()
	dirsCleanup()
	os.Exit(code)
}

// assertNothingLeft: the runner removed its tree and every survivor.
func assertNothingLeft(t *testing.T) {
	t.Helper()
	left, _ := filepath.Glob(fmt.Sprintf("/tmp/sbx-check-%d-*", os.Getpid()))
	for _, d := range left {
		if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) < 5*time.Minute && fi.Sys() != nil {
			t.Errorf("the runner left %s behind", d)
		}
	}
	// Survivors this process's runs tagged; none may be left. The listing
	// is the runner's own (sysctl on macOS, which has no /proc).
	procs, err := listProcesses()
	if err != nil {
		t.Errorf("survivors not checked: %v", err)
		return
	}
	prefix := fmt.Sprintf("survivor-%d-", os.Getpid())
	if pids := taggedIn(procs, os.Getpid(), func(a string) bool { return strings.HasPrefix(a, prefix) }); len(pids) > 0 {
		t.Errorf("survivors left: %v", pids)
	}
}

// judgeColumn holds results to their mechanism's column, one subtest per
// case: an escape the column does not declare fails, a declared one (a
// documented window or loss, never counted as held) is logged, an attempt
// that could not run fails, and so does any other outcome against the
// column. Then it logs the tally, fails when nothing held, and checks
// that nothing was left behind.
func judgeColumn(t *testing.T, mech string, results []Result, start time.Time) {
	t.Helper()
	counts := map[string]int{}
	for _, r := range results {
		counts[r.Verdict]++
		t.Run(r.ID, func(t *testing.T) {
			switch {
			case r.Error:
				t.Errorf("could not run: %s\ncontrol: %q\nconfined: %q", r.Reason, r.Control, r.Confined)
			case r.Verdict == Escaped && r.Expected == ExpectEscaped:
				t.Logf("escaped, as the %s column expects (%s): %s", mech, r.ExpectedWhy, r.Reason)
			case r.Verdict == Escaped:
				t.Errorf("ESCAPED under %s (expected %s): %s\ncontrol: %q\nconfined: %q", mech, r.Expected, r.Reason, r.Control, r.Confined)
			case r.Unexpected():
				t.Errorf("%s under %s, but the matrix expects %s: %s\ncontrol: %q\nconfined: %q", r.Verdict, mech, r.Expected, r.Reason, r.Control, r.Confined)
			default:
				t.Logf("%s: %s", r.Verdict, r.Reason)
			}
		})
	}
	t.Logf("%s as %s: %d held, %d ESCAPED, %d untested, %d n/a in %v", mech, sandboxtest.CurrentUser(),
		counts[Held], counts[Escaped], counts[Untested], counts[NA], time.Since(start).Round(time.Millisecond))
	if counts[Held] == 0 {
		t.Errorf("nothing held: the matrix proved nothing on this machine")
	}
	assertNothingLeft(t)
}
