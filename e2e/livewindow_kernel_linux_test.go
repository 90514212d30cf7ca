package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/landlock"
)

// The live window: what a command makes while its run lasts must not
// reach a host tool that runs meanwhile (docs/protected-paths.md, "The
// live window"). An MCP server's run lasts a whole agent session, and an
// editor runs git status in every repository under an open folder by
// itself.

// liveNames are the protected names the attack creates, each with the
// content a host read must not find.
var liveNames = []string{".claude/settings.json", ".mcp.json", ".vscode/tasks.json"}

const liveContent = "LIVE-WINDOW-CONTENT"

// liveAttack makes a repository whose core.fsmonitor touches marker and
// writes each of liveNames, says READY, then waits (bounded) for the file
// release, written by the test once it has looked; then it commits in its
// repository (COMMITTED): stripped, not removed, it still works.
func liveAttack(marker, release string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `git init -q r && git -C r config core.fsmonitor "touch %s; false" || exit 3; `, marker)
	for _, n := range liveNames {
		fmt.Fprintf(&b, `mkdir -p "$(dirname %s)"; printf '{"x":"%s"}' > %s; `, n, liveContent, n)
	}
	fmt.Fprintf(&b, `echo READY; i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; `, release)
	b.WriteString(`git -C r -c user.name=t -c user.email=t@t commit -q --allow-empty -m x && echo COMMITTED`)
	return b.String()
}

// liveHostGit runs the host's own git status in repo as the invoking
// user. As root, safe.directory is opened: sandbox-run's command runs as
// uid 65534 there, so git's ownership check would refuse the repository
// and hide whether its config runs a program; a user's own runs (CI's
// sbxci) make repositories the user owns, which that check lets through.
func liveHostGit(t *testing.T, repo string) string {
	t.Helper()
	args := []string{"-C", repo}
	if os.Geteuid() == 0 {
		args = append(args, "-c", "safe.directory=*")
	}
	c := exec.Command("git", append(args, "status")...)
	c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
	out, _ := c.CombinedOutput()
	return string(out)
}

// liveLook runs the host's git status in the command's repository and
// reads each protected name: it returns what reached the host.
func liveLook(t *testing.T, w, marker string) []string {
	t.Helper()
	var got []string
	out := liveHostGit(t, filepath.Join(w, "r"))
	if _, err := os.Stat(marker); err == nil {
		got = append(got, "core.fsmonitor ran on the host's git status")
	}
	for _, n := range liveNames {
		if b, err := os.ReadFile(filepath.Join(w, n)); err == nil && strings.Contains(string(b), liveContent) {
			got = append(got, n+" readable with the command's content")
		}
	}
	t.Logf("host git status: %s", strings.TrimSpace(out))
	return got
}

// liveSetup gives a subtest its workdir, a marker path the host's git
// (any uid) can write outside it, and a release file outside it.
func liveSetup(t *testing.T) (w, marker, release string) {
	w = sandboxtest.WorkDir(t)
	out := t.TempDir()
	os.Chmod(out, 0o777)
	return w, filepath.Join(out, "ran"), filepath.Join(sandboxtest.WorkDir(t), "release")
}

// TestLiveWindow: while a run lasts, the host's own git status in a
// repository the command made with core.fsmonitor runs nothing, and a
// host read of each protected name the command created finds none of
// its content; the test looks once the guard's audit records say it has
// acted (an event, waited for with a bound), then releases the run.
// Control: the same script under a plain bwrap (--bind W W) runs the
// program and leaves the files readable.
func TestLiveWindow(t *testing.T) {
	bw := sandboxtest.Bwrap(t)
	needGit(t)
	t.Run("control: plain bwrap", func(t *testing.T) {
		w, marker, release := liveSetup(t)
		c := exec.Command(bw, "--ro-bind", "/", "/", "--bind", w, w, "--dev", "/dev", "--proc", "/proc",
			"--unshare-pid", "--die-with-parent", "--chdir", w, "sh", "-c", liveAttack(marker, release))
		out := new(lockedBuffer)
		c.Stdout, c.Stderr = out, out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Wait()
		defer os.WriteFile(release, nil, 0o644)
		waitFor(t, out, "READY")
		if got := liveLook(t, w, marker); len(got) != 1+len(liveNames) {
			t.Fatalf("control: only %q reached the host under a plain bwrap (untested)", got)
		}
	})
	mechs := []struct {
		name  string
		flags []string
		gate  func(*testing.T)
	}{
		{"bwrap", nil, func(*testing.T) {}},
		{"landlock", []string{"--sandbox", "landlock"}, func(t *testing.T) { sandboxtest.Landlock(t, landlock.MinABI) }},
		{"gvisor", []string{"--sandbox", "gvisor"}, func(t *testing.T) { sandboxtest.Runsc(t) }},
	}
	for _, m := range mechs {
		t.Run(m.name, func(t *testing.T) {
			m.gate(t)
			w, marker, release := liveSetup(t)
			audit := filepath.Join(t.TempDir(), "audit.jsonl")
			rep := filepath.Join(t.TempDir(), "report.json")
			args := append([]string{"run", "--workdir", w, "--read", filepath.Dir(release), "--audit", audit, "--report", rep}, m.flags...)
			c := exec.Command(bin, append(args, "--", "sh", "-c", liveAttack(marker, release))...)
			c.Env = append(os.Environ(), cacheEnv(t)...)
			out := new(lockedBuffer)
			c.Stdout, c.Stderr = out, out
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			released := false
			defer func() {
				if !released {
					os.WriteFile(release, nil, 0o644)
					c.Wait()
				}
			}()
			waitFor(t, out, "READY")
			want := []string{filepath.Join(w, "r/.git/config"), filepath.Join(w, ".claude"), filepath.Join(w, ".mcp.json"), filepath.Join(w, ".vscode")}
			lat := waitAudit(t, audit, want)
			if got := liveLook(t, w, marker); len(got) > 0 {
				t.Errorf("while the run lasts: %q", got)
			}
			t.Logf("guard's records, after the run's start: %v", lat)
			os.WriteFile(release, nil, 0o644)
			released = true
			if err := c.Wait(); err != nil {
				t.Fatalf("run: %v: %s", err, out.String())
			}
			if !strings.Contains(out.String(), "COMMITTED") {
				t.Errorf("the command's git could not commit in its stripped repository: %s", out.String())
			}
			liveReport(t, rep, want)
			if _, err := os.Stat(marker); err == nil {
				t.Error("core.fsmonitor ran")
			}
		})
	}
}

// waitAudit waits, at most 60 s, until the audit holds a live_quarantine
// record for each path of want, and returns each record's time after
// run_start.
func waitAudit(t *testing.T, audit string, want []string) map[string]time.Duration {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(audit)
		var start time.Time
		got := map[string]time.Duration{}
		for _, line := range strings.Split(string(b), "\n") {
			var rec struct {
				Event string    `json:"event"`
				Path  string    `json:"path"`
				Time  time.Time `json:"time"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			switch rec.Event {
			case "run_start":
				start = rec.Time
			case "live_quarantine":
				got[rec.Path] = rec.Time.Sub(start)
			}
		}
		missing := 0
		for _, p := range want {
			if _, ok := got[p]; !ok {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s the audit has no live_quarantine record for %d of %q:\n%s", missing, want, b)
		}
	}
}

// liveReport checks the report: the guard ran, watched everything, and
// each path of want is in the quarantined list.
func liveReport(t *testing.T, path string, want []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		LiveGuard *struct {
			Started, Complete bool
			Neutralised       int
		} `json:"live_guard"`
		Quarantined []struct{ Path string } `json:"quarantined"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if g := rep.LiveGuard; g == nil || !g.Started || !g.Complete || g.Neutralised < len(want) {
		t.Errorf("report's live_guard: %+v", rep.LiveGuard)
	}
	for _, p := range want {
		found := false
		for _, q := range rep.Quarantined {
			found = found || q.Path == p
		}
		if !found {
			t.Errorf("%s not in the report's quarantined list", p)
		}
	}
}
