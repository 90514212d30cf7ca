package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/internal/protect"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// TestSweepBoundFailsClosed: a repository the command makes past the
// sweep's bound (here 20 entries, beside 40 files of the workdir) is not
// neutralised, and the run says so: exit 125, class sweep_incomplete, the
// report's sweep incomplete, one line on stderr. Control: the host's git
// status in that repository does run its program, so the exit status is
// what stands between the user and it. The same run under the default
// bound neutralises it: exit 0, the program does not run. The live guard
// is off: it would strip the config while the run lasts, and this tests
// the sweep after the run alone.
func TestSweepBoundFailsClosed(t *testing.T) {
	sandboxtest.Bwrap(t)
	if _, err := exec.LookPath("git"); err != nil {
		sandboxtest.Unavailable(t, "git", "apt-get install -y git")
	}
	type outcome struct {
		res    *Result
		stderr string
		ran    bool
	}
	run := func(b hostwalk.Bounds) outcome {
		w := sandboxtest.WorkDir(t)
		for i := range 40 {
			sandboxtest.WriteFile(t, filepath.Join(w, fmt.Sprintf("f%02d", i)), "x")
		}
		marker := filepath.Join(t.TempDir(), "ran")
		os.Chmod(filepath.Dir(marker), 0o777)
		repo := filepath.Join(w, "deep/er/r")
		script := fmt.Sprintf(`mkdir -p %[1]s/.git/objects %[1]s/.git/refs && echo 'ref: refs/heads/main' > %[1]s/.git/HEAD && `+
			`printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch %[2]s; false"\n' > %[1]s/.git/config`, repo, marker)
		errf, err := os.CreateTemp(t.TempDir(), "stderr")
		if err != nil {
			t.Fatal(err)
		}
		defer errf.Close()
		null, _ := os.Open(os.DevNull)
		defer null.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		p := policy.Policy{Sandbox: policy.ModeBwrap, Workdir: w}
		res, err := Run(ctx, p, []string{"sh", "-c", script}, Options{Stdout: null, Stderr: errf, BwrapCache: t.TempDir(), protect: protect.Hooks{Bounds: b, NoGuard: true}})
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if _, err := os.Stat(filepath.Join(repo, ".git/HEAD")); err != nil {
			t.Fatalf("the command made no repository: %v", err)
		}
		sandboxtest.Git(t, repo, "status")
		_, serr := os.Stat(marker)
		b2, _ := os.ReadFile(errf.Name())
		return outcome{res, string(b2), serr == nil}
	}

	small := run(hostwalk.Bounds{Entries: 20})
	if !small.ran {
		t.Fatal("control: past the bound, the host's git status did not run the planted program (untested)")
	}
	if small.res.ExitCode != ExitSetup || small.res.Report.Exit == nil || small.res.Report.Exit.Class != report.ClassSweepIncomplete {
		t.Errorf("exit %d, %+v; want 125, class %s", small.res.ExitCode, small.res.Report.Exit, report.ClassSweepIncomplete)
	}
	if s := small.res.Report.Sweep; s == nil || s.Complete || len(s.Skipped) == 0 {
		t.Errorf("report's sweep %+v, want it incomplete with what was skipped", s)
	}
	lines := strings.Split(strings.TrimRight(small.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "sweep for git directories after the run is incomplete") || !strings.Contains(lines[0], "fix:") {
		t.Errorf("stderr %q, want one line naming the incomplete sweep and the fix", small.stderr)
	}

	whole := run(hostwalk.Bounds{})
	if whole.ran {
		t.Error("under the default bound, the planted program ran on the host's git status")
	}
	if whole.res.ExitCode != 0 || whole.res.Report.Sweep == nil || !whole.res.Report.Sweep.Complete {
		t.Errorf("default bound: exit %d, sweep %+v; want 0 and a complete sweep", whole.res.ExitCode, whole.res.Report.Sweep)
	}
}
