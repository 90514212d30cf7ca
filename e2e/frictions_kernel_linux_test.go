package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// gitRepoIn makes a repository with one commit at dir, as the host user.
func gitRepoIn(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		sandboxtest.Unavailable(t, "git", "apt-get install git")
	}
	for _, args := range [][]string{{"init", "-q"}, {"-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"}} {
		c := exec.Command("git", args...)
		c.Dir = dir
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
}

// TestGitConfigHeldNotNetwork: git config refused at the top of a
// repository says the config is held, and no longer that the sandbox has
// no network; git fetch there still gets the network note (control).
func TestGitConfigHeldNotNetwork(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	gitRepoIn(t, w)
	if os.Geteuid() == 0 {
		// The repository is the sandbox's uid's, as a workdir is.
		exec.Command("chown", "-R", "65534:65534", w).Run()
	}
	r := run(t, "", "run", "--workdir", w, "--", "git", "config", "user.name", "x")
	if r.code == 0 || !strings.Contains(r.stderr, "is held read-only") {
		t.Errorf("git config: exit %d, stderr %q; want the held-config hint", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "no network") {
		t.Errorf("git config failure explained as no network: %q", r.stderr)
	}
	r = run(t, "", "run", "--workdir", w, "--", "git", "fetch", "https://github.com/x/y")
	if !strings.Contains(r.stderr, "no network") {
		t.Errorf("control: git fetch without egress lacks the network note: exit %d %q", r.code, r.stderr)
	}
}

// TestWorktreeOutsideRepo: a workdir that is a linked worktree of a
// repository outside it is named with the exact --write, and that --write
// makes git work there (the control: without it, git fails).
func TestWorktreeOutsideRepo(t *testing.T) {
	needBwrap(t)
	base := sandboxtest.WorkDir(t)
	main := filepath.Join(base, "main")
	os.Mkdir(main, 0o755)
	gitRepoIn(t, main)
	wt := filepath.Join(base, "wt")
	if out, err := exec.Command("git", "-C", main, "worktree", "add", "-q", wt).CombinedOutput(); err != nil {
		t.Fatalf("git worktree add: %v %s", err, out)
	}
	if os.Geteuid() == 0 {
		exec.Command("chown", "-R", "65534:65534", base).Run()
	}
	repo := filepath.Join(main, ".git")
	r := run(t, "", "run", "--workdir", wt, "--", "git", "status", "--short")
	if r.code == 0 {
		t.Errorf("control: git worked in the worktree without its repository: %q", r.stderr)
	}
	if !strings.Contains(r.stderr, "fix: --write "+repo+"\n") {
		t.Errorf("the note does not name --write %s: %q", repo, r.stderr)
	}
	r = run(t, "", "run", "--workdir", wt, "--write", repo, "--", "git", "status", "--short")
	if r.code != 0 || strings.Contains(r.stderr, "git worktree of") {
		t.Errorf("with --write %s: exit %d %q", repo, r.code, r.stderr)
	}
}

// TestOwnExit125: a command that exits 125 by itself is told apart from
// a refusal: the summary says the status is the command's own and no
// sandbox-run line precedes it, and --exit-code-refusal moves refusals
// (not the command's 125) to another status.
func TestOwnExit125(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	r := run(t, "", "run", "--workdir", w, "--summary", "--exit-code-refusal", "250", "--", "sh", "-c", "exit 125")
	if r.code != 125 || !strings.Contains(r.stderr, "exit 125 (the command's own status)") {
		t.Errorf("own 125: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(l, "sandbox-run: ") {
			t.Errorf("own 125 printed a sandbox-run line: %q", l)
		}
	}
	// A refusal: 125 by default, one sandbox-run line; 250 with the flag.
	r = run(t, "", "run", "--workdir", w, "--allow-host", "localhost", "--", "true")
	oneLine(t, r, "sandbox-run: ", "fix: drop --allow-host localhost")
	r = run(t, "", "run", "--workdir", w, "--exit-code-refusal", "250", "--allow-host", "localhost", "--", "true")
	if r.code != 250 || !strings.HasPrefix(r.stderr, "sandbox-run: ") {
		t.Errorf("refusal with --exit-code-refusal 250: exit %d %q", r.code, r.stderr)
	}
	r = run(t, "", "run", "--workdir", w, "--exit-code-refusal", "0", "--", "true")
	oneLine(t, r, "--exit-code-refusal 0", "fix: ")
}

// TestCheckLeavesNoQuarantine: sandbox-run check plants protected files
// in its cases, and leaves nothing of them in the caller's quarantine.
// Control: a run that creates a protected file does put it there, so the
// directory watched is the one the runs use.
func TestCheckLeavesNoQuarantine(t *testing.T) {
	needBwrap(t)
	cache, err := os.MkdirTemp("", "sbx-check-cache-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cache) })
	env := []string{"XDG_CACHE_HOME=" + cache}
	q := filepath.Join(cache, "sandbox-run", "quarantine")
	r := runEnv(t, env, "", "check")
	if !strings.Contains(r.stdout, "matrix/") {
		t.Fatalf("check ran no escape matrix: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if ents, _ := os.ReadDir(q); len(ents) != 0 {
		t.Errorf("check left %d entries in the quarantine %s", len(ents), q)
	}
	w := sandboxtest.WorkDir(t)
	runEnv(t, env, "", "run", "--workdir", w, "--", "sh", "-c", "echo x > .bashrc")
	if ents, _ := os.ReadDir(q); len(ents) == 0 {
		t.Errorf("control: a planted .bashrc did not reach the quarantine %s", q)
	}
}
