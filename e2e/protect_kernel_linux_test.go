package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/policy"
)

// The protected-path suite: every default held when present and
// neutralised when created; nothing of sandbox-run's left in the tree; git
// metadata at depth 1, 2 and 3, judged by what a host `git status` runs;
// parallel runs on one workdir in both end orders, one of them killed.

// cacheEnv gives a test its own cache (journals and quarantine), so that
// runs of other tests never settle its journals.
func cacheEnv(t *testing.T) []string {
	t.Helper()
	return []string{"XDG_CACHE_HOME=" + t.TempDir()}
}

// bwrapPaths are bwrap's two ways to start the command, as run's extra
// flags: the fast path (the trampoline) and init's (here, to forward the
// proxy), which ends a run in its own order.
var bwrapPaths = []struct {
	name  string
	extra []string
}{{"fast", nil}, {"network", []string{"--allow-host", "example.com"}}}

// inSandbox runs sh -c script in a sandbox on w with the test's cache.
func inSandbox(t *testing.T, env []string, w, script string, extra ...string) result {
	t.Helper()
	args := append([]string{"run", "--workdir", w}, extra...)
	args = append(args, "--", "sh", "-c", script)
	// Real tools (a cold go build, npm) under a loaded CI machine's two
	// cores took more than runEnv's 60 s once.
	return runBinWithin(t, 240*time.Second, bin, env, "", args...)
}

// hostGit runs the host's git in dir as a user would (safe.directory
// opened, since the tree belongs to the sandbox's uid when the test runs
// as root) and returns its output.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	c.Env = append(os.Environ(), "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, _ := c.CombinedOutput()
	return string(out)
}

// chownAll gives the whole tree to the sandbox's uid (when root).
func chownAll(t *testing.T, dir string) {
	t.Helper()
	filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { sandboxtest.Chown(t, p); return nil })
}

// needGit gates a test on the host's git.
func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		sandboxtest.Unavailable(t, "git", "apt-get install -y git")
	}
}

// TestProtectedDefaultsEach: every default protected path (and the held
// parts of a top-level .git) is read-only when it exists; when it does
// not, what the command creates there is gone from the tree after the
// run, named on stderr, and kept in the quarantine. Control: unconfined,
// every write lands and stays.
func TestProtectedDefaultsEach(t *testing.T) {
	needBwrap(t)
	names := policy.DefaultProtected()
	for _, g := range policy.GitHeld() {
		names = append(names, ".git/"+g)
	}
	for _, name := range names {
		for _, present := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/present=%v", name, present), func(t *testing.T) {
				t.Parallel()
				env := cacheEnv(t)
				p := filepath.Join("$PWD", name)
				// A directory default gets a file inside, a file default is
				// written; either way the script says WROTE on success.
				attack := fmt.Sprintf(`mkdir -p "$(dirname %[1]s)" 2>/dev/null; if [ -d %[1]s ]; then echo evil > %[1]s/planted 2>/dev/null && echo WROTE; else echo evil >> %[1]s 2>/dev/null && echo WROTE; fi; true`, p)
				setup := func(w string) {
					if strings.HasPrefix(name, ".git/") {
						os.MkdirAll(filepath.Join(w, ".git", "objects"), 0o755)
						os.MkdirAll(filepath.Join(w, ".git", "refs"), 0o755)
						os.WriteFile(filepath.Join(w, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
					}
					if present {
						os.MkdirAll(filepath.Dir(filepath.Join(w, name)), 0o755)
						if dirDefault(name) {
							os.MkdirAll(filepath.Join(w, name), 0o755)
						} else {
							os.WriteFile(filepath.Join(w, name), []byte("orig\n"), 0o644)
						}
					}
					chownAll(t, w)
				}
				cw := sandboxtest.WorkDir(t)
				setup(cw)
				if ctl := unconfined(t, cw, attack); !strings.Contains(ctl.stdout, "WROTE") {
					t.Fatalf("control: unconfined write to %s failed (untested): %q %q", name, ctl.stdout, ctl.stderr)
				}
				w := sandboxtest.WorkDir(t)
				setup(w)
				before := fileSnapshot(t, w)
				r := inSandbox(t, env, w, attack)
				if r.code != 0 {
					t.Fatalf("exit %d: %s", r.code, r.stderr)
				}
				if present && strings.Contains(r.stdout, "WROTE") {
					t.Errorf("%s written while held", name)
				}
				if !present && !strings.Contains(r.stdout, "WROTE") {
					t.Fatalf("the command could not create %s (the live window is expected to allow it): %q", name, r.stderr)
				}
				if !present && !strings.Contains(r.stderr, "sandbox-run: quarantined "+filepath.Join(w, name)) {
					t.Errorf("no quarantine line for %s on stderr: %q", name, r.stderr)
				}
				after := fileSnapshot(t, w)
				if present && after != before {
					t.Errorf("the run changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
				}
				if _, err := os.Lstat(filepath.Join(w, name)); !present && err == nil {
					t.Errorf("%s created by the command is still in the tree", name)
				}
			})
		}
	}
}

// dirDefault: the defaults that are directories.
func dirDefault(name string) bool {
	switch name {
	case ".claude", ".codex", ".cursor", ".gemini", ".vscode", ".idea", ".zed", ".amazonq", ".roo",
		".continue", ".devcontainer", ".config/fish", ".github/workflows", ".git/hooks":
		return true
	}
	return false
}

// TestProtectNoClutter: in a fresh workdir and in an existing repository,
// the everyday tools work inside the sandbox, and a host `git status`
// afterwards shows only what the command made: no protected-path entry,
// no placeholder. A local git config write in an existing repository
// fails; the global one works.
func TestProtectNoClutter(t *testing.T) {
	needBwrap(t)
	needGit(t)
	tools := `set -e
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@a
export GOTELEMETRY=off GOCACHE=/tmp/gocache GOPATH=/tmp/gopath GOTOOLCHAIN=local GOFLAGS=-mod=mod npm_config_cache=/tmp/npm
[ -d .git ] || git init -q
printf 'module example.com/m\n\ngo 1.21\n' > go.mod
printf 'package main\n\nfunc main() {}\n' > main.go
git add -A && git commit -qm one
"$GO" build -o /tmp/m . && "$GO" version -m /tmp/m | grep -q vcs.revision && echo GO-VCS-OK
if command -v npm >/dev/null; then npm init -y >/dev/null && echo NPM-OK; else echo NPM-OK; fi
git config --global user.name me && echo GLOBAL-OK
git config user.email me@me 2>/tmp/err && echo LOCAL-WROTE || { echo LOCAL-REFUSED; grep -q "git config --global" /tmp/err && grep -q "git -c" /tmp/err && echo LOCAL-HINT; }
git checkout -qb topic && git commit -q --allow-empty -m two && echo BRANCH-OK
`
	goBin, err := exec.LookPath("go")
	if err != nil {
		sandboxtest.Unavailable(t, "go on PATH", "install Go")
	}
	goBin, _ = filepath.EvalSymlinks(goBin)
	goRoot := filepath.Dir(filepath.Dir(goBin))
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			w := sandboxtest.WorkDir(t)
			if existing {
				hostGit(t, w, "init", "-q")
				hostGit(t, w, "commit", "-q", "--allow-empty", "-m", "init")
				chownAll(t, w)
			}
			r := inSandbox(t, cacheEnv(t), w, tools, "--read", goRoot, "--env", "GO="+goBin)
			for _, want := range []string{"GO-VCS-OK", "NPM-OK", "GLOBAL-OK", "BRANCH-OK"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("no %s: exit %d, stdout %q, stderr %q", want, r.code, r.stdout, r.stderr)
				}
			}
			if existing && !strings.Contains(r.stdout, "LOCAL-REFUSED") {
				t.Errorf("a local git config write in an existing repository landed: %q", r.stdout)
			}
			if existing && !strings.Contains(r.stdout, "LOCAL-HINT") {
				t.Errorf("the refused git config write does not name git config --global and git -c: %q", r.stdout)
			}
			if !existing && !strings.Contains(r.stdout, "LOCAL-WROTE") {
				t.Errorf("a git config write in the command's own repository failed: %q", r.stdout)
			}
			st := hostGit(t, w, "status", "--porcelain", "--ignored", "-uall")
			for _, line := range strings.Split(strings.TrimSpace(st), "\n") {
				f := strings.TrimSpace(line)
				if len(f) > 3 {
					f = f[3:]
				}
				switch f {
				case "", "go.mod", "main.go", "package.json", ".gitconfig":
					continue
				}
				if strings.HasPrefix(f, ".config/go/") { // the go command's telemetry, under HOME
					continue
				}
				t.Errorf("host git status shows %q, which the command did not make", line)
			}
		})
	}
}

// gitVector is one way to make a host `git status` run a program by
// writing git metadata; plant runs inside the repository (at depth d of
// the workdir), judge is the directory the host's git status runs in.
type gitVector struct {
	name  string
	setup func(t *testing.T, repo string)
	plant string
	extra func(repo string) []string // further flags (--write)
	judge func(repo string) string
}

// fsmonitorConfig is a config whose core.fsmonitor touches marker.
func fsmonitorLine(marker string) string {
	return fmt.Sprintf("[core]\n\tfsmonitor = \"touch %s; false\"\n", marker)
}

func gitVectors(marker string) []gitVector {
	plain := func(t *testing.T, repo string) {
		hostGit(t, repo, "init", "-q")
		hostGit(t, repo, "commit", "-q", "--allow-empty", "-m", "init")
	}
	return []gitVector{
		{name: "config fsmonitor", setup: plain,
			plant: fmt.Sprintf(`printf '%s' >> .git/config`, fsmonitorLine(marker)),
			judge: func(r string) string { return r }},
		{name: "commondir", setup: plain,
			plant: fmt.Sprintf(`mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD evil/ && printf '[core]\n\trepositoryformatversion = 0\n%s' > evil/config && echo ../evil > .git/commondir`, strings.TrimPrefix(fsmonitorLine(marker), "[core]\n")),
			judge: func(r string) string { return r }},
		{name: "submodule config", setup: func(t *testing.T, repo string) {
			src := filepath.Join(filepath.Dir(repo), filepath.Base(repo)+"-src")
			os.MkdirAll(src, 0o755)
			t.Cleanup(func() { os.RemoveAll(src) })
			plain(t, src)
			plain(t, repo)
			hostGit(t, repo, "-c", "protocol.file.allow=always", "submodule", "-q", "add", src, "sm")
			hostGit(t, repo, "commit", "-qm", "sm")
		},
			plant: fmt.Sprintf(`printf '%s' >> .git/modules/sm/config`, fsmonitorLine(marker)),
			judge: func(r string) string { return r }},
		{name: "worktree, main .git passed with --write", setup: func(t *testing.T, repo string) {
			// The main repository lies outside the workdir; the worktree is
			// at the vector's depth, and the main .git is passed with --write.
			main := mainOf(repo)
			os.MkdirAll(main, 0o755)
			t.Cleanup(func() { os.RemoveAll(main) })
			plain(t, main)
			hostGit(t, main, "worktree", "add", "-q", repo)
			chownAll(t, main)
		},
			plant: fmt.Sprintf(`printf '%s' >> "$(sed -n 's/^gitdir: //p' .git)/../../config"`, fsmonitorLine(marker)),
			extra: func(r string) []string { return []string{"--write", mainOf(r) + "/.git"} },
			judge: func(r string) string { return r }},
		{name: "gitfile", setup: func(t *testing.T, repo string) { os.MkdirAll(repo, 0o755) },
			// A .git file (gitdir: PATH) made where there was none sends
			// host git to a repository the command chose, under any name.
			plant: fmt.Sprintf(`git init -q evil && printf '%s' >> evil/.git/config && mv evil/.git evilgit && rmdir evil && echo 'gitdir: evilgit' > .git`, fsmonitorLine(marker)),
			judge: func(r string) string { return r }},
		{name: "new nested repository", setup: func(t *testing.T, repo string) { os.MkdirAll(repo, 0o755) },
			plant: fmt.Sprintf(`git init -q new && printf '%s' >> new/.git/config`, fsmonitorLine(marker)),
			judge: func(r string) string { return filepath.Join(r, "new") }},
	}
}

// mainOf is where the worktree vector keeps the main repository of a
// worktree at repo: outside every workdir.
func mainOf(repo string) string {
	return filepath.Join(os.TempDir(), "sbx-main"+strings.ReplaceAll(repo, "/", "_"))
}

// TestGitMetadataAtDepth: each git vector at depth 1, 2 and 3 of the
// workdir. Control: the same planting, unconfined, makes the host's git
// status run the planted program; under sandbox-run it never does.
func TestGitMetadataAtDepth(t *testing.T) {
	needBwrap(t)
	needGit(t)
	for depth := 1; depth <= 3; depth++ {
		for vi := range gitVectors("") {
			t.Run(fmt.Sprintf("%s/depth=%d", gitVectors("")[vi].name, depth), func(t *testing.T) {
				t.Parallel()
				rel := strings.Repeat("d/", depth-1)
				try := func(sandbox bool) bool {
					w := sandboxtest.WorkDir(t)
					marker := filepath.Join(t.TempDir(), "ran")
					v := gitVectors(marker)[vi]
					repo := filepath.Join(w, rel)
					os.MkdirAll(repo, 0o755)
					v.setup(t, repo)
					chownAll(t, w)
					os.Chmod(filepath.Dir(marker), 0o777)
					script := "cd " + repo + " && " + v.plant + "; true"
					var r result
					var extra []string
					if v.extra != nil {
						extra = v.extra(repo)
					}
					if sandbox {
						r = inSandbox(t, cacheEnv(t), w, script, extra...)
					} else {
						r = unconfined(t, w, script, extra...)
					}
					if r.code != 0 {
						t.Fatalf("sandbox=%v: exit %d: %s", sandbox, r.code, r.stderr)
					}
					hostGit(t, v.judge(repo), "status")
					_, err := os.Stat(marker)
					return err == nil
				}
				if !try(false) {
					t.Fatal("control: unconfined, the planted setting did not run on the host's git status (untested)")
				}
				if try(true) {
					t.Error("the planted setting ran on the host's git status after a sandboxed run")
				}
			})
		}
	}
}

// startHeldRun starts sandbox-run on w with a command that waits for the file
// release (written from outside), then runs script.
func startHeldRun(t *testing.T, env []string, w, release, script string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	// UP says the sandbox is up: sandbox-run has planned (seen which
	// protected paths exist) and started the command.
	wait := fmt.Sprintf(`echo UP; i=0; while [ ! -e %s ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; `, release)
	// A run whose release.hold exists stays after script, to be killed.
	hold := fmt.Sprintf(`; if [ -e %s.hold ]; then echo HOLDING; sleep 30; fi`, release)
	c := exec.Command(bin, "run", "--workdir", w, "--read", filepath.Dir(release), "--", "sh", "-c", wait+script+hold)
	c.Env = append(os.Environ(), env...)
	out := new(lockedBuffer)
	c.Stdout, c.Stderr = out, out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c, out
}

// waitUp waits until every run has said UP (startHeldRun): a run
// released before another has planned would have its .mcp.json seen as
// existing, and held, by the later one.
func waitUp(t *testing.T, outs []*lockedBuffer) {
	t.Helper()
	for _, o := range outs {
		waitFor(t, o, "UP")
	}
}

// waitFor waits, at most 60 s, until a run's output holds word.
func waitFor(t *testing.T, out *lockedBuffer, word string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(out.String(), word); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s from the run after 60 s: %q", word, out.String())
		}
	}
}

// TestParallelRuns: N runs on one workdir that holds a repository; they
// end one by one (first started first, or last started first, or with one
// SIGKILLed). Each run, as it ends, has the ones still running try to plant
// a hook and a config setting (refused while any run lives), and creates
// .mcp.json, which a live run's guard moves out as it appears (waited for,
// bounded). After the last has ended, .mcp.json is gone from the tree;
// after a killed last run, a .mcp.json at its watched path (written by the
// test, standing for what its command made before the guard acted) is
// removed by the next run, which settles the killed run's journal.
// Control: the same writes, unconfined, land.
func TestParallelRuns(t *testing.T) {
	needBwrap(t)
	needGit(t)
	attack := `echo x > .git/hooks/pre-commit 2>/dev/null && echo HOOK-WROTE; echo "[core] fsmonitor = x" >> .git/config 2>/dev/null && echo CONFIG-WROTE; echo '{}' > .mcp.json && echo MCP-WROTE`
	cw := sandboxtest.WorkDir(t)
	hostGit(t, cw, "init", "-q")
	chownAll(t, cw)
	if ctl := unconfined(t, cw, attack); !strings.Contains(ctl.stdout, "HOOK-WROTE") || !strings.Contains(ctl.stdout, "CONFIG-WROTE") {
		t.Fatalf("control: unconfined writes failed (untested): %q", ctl.stdout)
	}
	for _, n := range []int{2, 8} {
		for _, order := range []string{"first-ends-first", "last-ends-first", "one-killed", "last-killed"} {
			t.Run(fmt.Sprintf("n=%d/%s", n, order), func(t *testing.T) {
				env := cacheEnv(t)
				w := sandboxtest.WorkDir(t)
				hostGit(t, w, "init", "-q")
				chownAll(t, w)
				rel := sandboxtest.WorkDir(t) // release files, outside the workdir, read-only inside
				cmds := make([]*exec.Cmd, n)
				outs := make([]*lockedBuffer, n)
				for i := range cmds {
					release := filepath.Join(rel, fmt.Sprint(i))
					cmds[i], outs[i] = startHeldRun(t, env, w, release, attack)
				}
				waitUp(t, outs)
				idx := make([]int, n)
				for i := range idx {
					idx[i] = i
					if order == "last-ends-first" {
						idx[i] = n - 1 - i
					}
				}
				for k, i := range idx {
					kill := (order == "one-killed" && k == 0) || (order == "last-killed" && k == n-1)
					if kill {
						// The killed run still plants first: its .mcp.json must
						// not survive the runs after it.
						os.WriteFile(filepath.Join(rel, fmt.Sprint(i)+".hold"), nil, 0o644)
						os.WriteFile(filepath.Join(rel, fmt.Sprint(i)), nil, 0o644)
						waitFor(t, outs[i], "HOLDING")
						cmds[i].Process.Signal(syscall.SIGKILL)
						cmds[i].Wait()
						continue
					}
					os.WriteFile(filepath.Join(rel, fmt.Sprint(i)), nil, 0o644)
					cmds[i].Wait()
					out := outs[i].String()
					if strings.Contains(out, "HOOK-WROTE") || strings.Contains(out, "CONFIG-WROTE") {
						t.Errorf("run %d (ended %d of %d) wrote git metadata: %q", i, k+1, n, out)
					}
					if !strings.Contains(out, "MCP-WROTE") {
						t.Errorf("run %d could not create .mcp.json: %q", i, out)
					}
					if k < n-1 {
						waitMoved(t, filepath.Join(w, ".mcp.json"))
					}
				}
				if order == "last-killed" {
					// The killed run's guard died with it: what its command
					// made after the guard's last action stays until the next
					// run settles the journal.
					if err := os.WriteFile(filepath.Join(w, ".mcp.json"), []byte("{}"), 0o644); err != nil {
						t.Fatal(err)
					}
					inSandbox(t, env, sandboxtest.WorkDir(t), "true")
				}
				if _, err := os.Lstat(filepath.Join(w, ".mcp.json")); err == nil {
					t.Errorf(".mcp.json still in the tree after the last run")
				}
				if _, err := os.Lstat(filepath.Join(w, ".git/hooks/pre-commit")); err == nil {
					t.Errorf("a pre-commit hook reached the host")
				}
				if strings.Contains(hostGit(t, w, "config", "--local", "--list"), "fsmonitor") {
					t.Errorf("a config setting reached the host")
				}
			})
		}
	}
}

// waitMoved waits, at most 60 s, until p is gone: a live run's guard
// moves it out as it appears.
func waitMoved(t *testing.T, p string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Lstat(p); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still in the tree after 60 s while runs were live", p)
		}
	}
}

// TestProtectWalkReport: the start-up walk is in the report, with the
// git directories it found at depth.
func TestProtectWalkReport(t *testing.T) {
	needBwrap(t)
	needGit(t)
	w := sandboxtest.WorkDir(t)
	for _, d := range []string{"a", "a/b/c"} {
		os.MkdirAll(filepath.Join(w, d), 0o755)
		hostGit(t, filepath.Join(w, d), "init", "-q")
	}
	chownAll(t, w)
	rep := filepath.Join(t.TempDir(), "r.json")
	r := runEnv(t, cacheEnv(t), "", "run", "--workdir", w, "--report", rep, "--", "true")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	b, _ := os.ReadFile(rep)
	var got struct {
		Walk *struct {
			GitDirs  int  `json:"git_dirs"`
			Complete bool `json:"complete"`
		} `json:"protect_walk"`
		Protected []string `json:"protected"`
	}
	if err := json.Unmarshal(b, &got); err != nil || got.Walk == nil {
		t.Fatalf("report: %v: %s", err, b)
	}
	if got.Walk.GitDirs != 2 || !got.Walk.Complete {
		t.Errorf("walk found %d git dirs (complete %v), want 2", got.Walk.GitDirs, got.Walk.Complete)
	}
	if !slices.Contains(got.Protected, filepath.Join(w, "a/b/c/.git/config")) {
		t.Errorf("a/b/c/.git/config not held: %v", got.Protected)
	}
}

// TestProtectAddAndRemove: --protect adds a path (held when present); a
// profile's unprotect removes a default, which the command can then write,
// and the report warns of it. Control: the same writes, unconfined.
func TestProtectAddAndRemove(t *testing.T) {
	needBwrap(t)
	attack := `echo x >> custom.cfg 2>/dev/null && echo CUSTOM-WROTE; echo x > .vscode/tasks.json 2>/dev/null && echo VSCODE-WROTE; true`
	setup := func() string {
		w := sandboxtest.WorkDir(t)
		os.WriteFile(filepath.Join(w, "custom.cfg"), []byte("orig\n"), 0o644)
		os.Mkdir(filepath.Join(w, ".vscode"), 0o755)
		chownAll(t, w)
		return w
	}
	if ctl := unconfined(t, setup(), attack); !strings.Contains(ctl.stdout, "CUSTOM-WROTE") || !strings.Contains(ctl.stdout, "VSCODE-WROTE") {
		t.Fatalf("control: unconfined writes failed (untested): %q", ctl.stdout)
	}
	w := setup()
	prof := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(prof, []byte(`{"unprotect":[".vscode"]}`), 0o644)
	rep := filepath.Join(t.TempDir(), "r.json")
	r := inSandbox(t, cacheEnv(t), w, attack, "--protect", "custom.cfg", "--config", prof, "--report", rep)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "CUSTOM-WROTE") {
		t.Error("--protect custom.cfg was written")
	}
	if !strings.Contains(r.stdout, "VSCODE-WROTE") {
		t.Error("an unprotected .vscode stayed read-only")
	}
	b, _ := os.ReadFile(rep)
	if !strings.Contains(string(b), "built-in protected path .vscode is not protected") {
		t.Errorf("no warning in the report: %s", b)
	}
}

// TestQuarantineInReport: what the command created at a missing protected
// path is named in the report with where it went, and is there, as the
// command wrote it; on the network path too, where the run's end is
// settled while the proxy stops, and the report still has the proxy's
// counts. Control: unconfined, the file stays in the workdir.
func TestQuarantineInReport(t *testing.T) {
	needBwrap(t)
	script := `echo '{"mcpServers":{"x":{"command":"evil"}}}' > .mcp.json`
	cw := sandboxtest.WorkDir(t)
	if unconfined(t, cw, script); !fileHas(filepath.Join(cw, ".mcp.json"), "evil") {
		t.Fatal("control: unconfined, .mcp.json was not written (untested)")
	}
	for _, c := range bwrapPaths {
		t.Run(c.name, func(t *testing.T) {
			w := sandboxtest.WorkDir(t)
			rep := filepath.Join(t.TempDir(), "r.json")
			r := inSandbox(t, cacheEnv(t), w, script, append([]string{"--report", rep}, c.extra...)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			var got struct {
				Quarantined []struct{ Path, To, Why, Run string } `json:"quarantined"`
				RunID       string                                `json:"run_id"`
				Egress      *struct{ Allowed, Refused int }       `json:"egress"`
			}
			b, _ := os.ReadFile(rep)
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Quarantined) != 1 || got.Quarantined[0].Path != filepath.Join(w, ".mcp.json") || got.Quarantined[0].Run != got.RunID {
				t.Fatalf("report quarantined %+v", got.Quarantined)
			}
			if !fileHas(got.Quarantined[0].To, "evil") {
				t.Errorf("the quarantine %s does not hold what the command wrote", got.Quarantined[0].To)
			}
			if fileHas(filepath.Join(w, ".mcp.json"), "") {
				t.Errorf(".mcp.json still in the workdir")
			}
			if (got.Egress != nil) != (c.extra != nil) {
				t.Errorf("report egress counts %+v on the %s path", got.Egress, c.name)
			}
		})
	}
}

// fileHas says whether p is a file that holds s.
func fileHas(p, s string) bool {
	b, err := os.ReadFile(p)
	return err == nil && strings.Contains(string(b), s)
}

// TestGitReinit: git init in an existing repository succeeds in the
// sandbox when the re-init would change nothing held (the host's config
// and hooks stay byte for byte), and fails with sandbox-run's one line,
// writing nothing, when it would (a config setting re-init rewrites, a
// sample hook re-init puts back). Control: unconfined, the same git init
// succeeds and does change the config or the hooks, so each refusal is
// the hold's doing and the comparison can tell.
func TestGitReinit(t *testing.T) {
	needBwrap(t)
	needGit(t)
	for _, tt := range []struct {
		name    string
		prepare func(t *testing.T, w string)
		changes bool
	}{
		{"unchanged", func(*testing.T, string) {}, false},
		{"filemode", func(t *testing.T, w string) { hostGit(t, w, "config", "core.filemode", "false") }, true},
		{"missing sample hook", func(t *testing.T, w string) {
			if err := os.Remove(filepath.Join(w, ".git/hooks/pre-commit.sample")); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			state := func(w string) string {
				b, _ := os.ReadFile(filepath.Join(w, ".git/config"))
				ents, _ := os.ReadDir(filepath.Join(w, ".git/hooks"))
				s := string(b)
				for _, e := range ents {
					s += "\n" + e.Name()
				}
				return s
			}
			try := func(sandbox bool) (result, bool) {
				w := sandboxtest.WorkDir(t)
				hostGit(t, w, "init", "-q")
				tt.prepare(t, w)
				chownAll(t, w)
				before := state(w)
				var r result
				if sandbox {
					r = inSandbox(t, cacheEnv(t), w, "git init")
				} else {
					r = unconfined(t, w, "git init")
				}
				return r, state(w) != before
			}
			r, changed := try(false)
			if r.code != 0 || changed != tt.changes {
				t.Fatalf("control: unconfined git init: exit %d, changed %v, want exit 0, changed %v (untested): %s", r.code, changed, tt.changes, r.stderr)
			}
			r, changed = try(true)
			if changed {
				t.Fatalf("git init in the sandbox changed the host's config or hooks: %+v", r)
			}
			switch {
			case !tt.changes && (r.code != 0 || !strings.Contains(r.stdout, "Reinitialized existing Git repository")):
				t.Errorf("a re-init that changes nothing: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			case tt.changes && (r.code != 128 || !strings.Contains(r.stderr, "sandbox-run: git init: re-initialising") || !strings.Contains(r.stderr, "; fix: ")):
				t.Errorf("a re-init that would change a held part: exit %d, stderr %q; want 128 and sandbox-run's line", r.code, r.stderr)
			}
		})
	}
}
