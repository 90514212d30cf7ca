package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// hostFileAttack is one way a sandboxed command prepares, in its workdir,
// a path that sandbox-run will later open on the host.
type hostFileAttack struct {
	kind string
	// plant is the script the command runs in its workdir; {OUT} is a
	// directory outside it, of the user running the test.
	plant string
	// rel is the path handed to the flag, relative to the workdir.
	rel string
	// target is what a naive opener reaches, relative to {OUT} ("" means
	// the planted file in the workdir itself).
	target string
}

var hostFileAttacks = []hostFileAttack{
	{"plain file", `printf '{"sandbox":"off"}' > f.json`, "f.json", ""},
	{"dangling link", `ln -s {OUT}/new f.json`, "f.json", "new"},
	{"link to a file outside", `ln -s {OUT}/secret f.json`, "f.json", "secret"},
	{"parent dir is a link", `ln -s {OUT}/other sub`, "sub/f.json", "other/f.json"},
}

// TestHostFilesOutOfReach: a command plants a file or a link in its
// workdir; a later sandbox-run given --report, --audit or --config there
// refuses (125, one line naming the path and a fix) and the target stays
// as it was. The control: a naive opener (os.WriteFile, an O_APPEND|O_CREATE
// open, os.ReadFile) on the same path reaches the target. As root the
// target outside is a root-only file; as a user, a file only that user may
// write.
func TestHostFilesOutOfReach(t *testing.T) {
	needBwrap(t)
	for _, a := range hostFileAttacks {
		for _, flag := range []string{"report", "audit", "config"} {
			if flag == "config" && a.kind == "dangling link" {
				continue // nothing there for a reader to reach
			}
			t.Run(a.kind+"/"+flag, func(t *testing.T) {
				w := sandboxtest.WorkDir(t)
				out := t.TempDir() // 0700, the test user's: the sandbox's uid cannot reach it
				secret := filepath.Join(out, "secret")
				mustWrite(t, secret, "SECRET\n")
				os.Chmod(secret, 0o600)
				mustMkdir(t, filepath.Join(out, "other"))
				if flag == "config" {
					mustWrite(t, filepath.Join(out, "other", "f.json"), `{"sandbox":"off"}`)
				}
				plant := strings.ReplaceAll(a.plant, "{OUT}", out)
				if r := sandboxed(t, w, plant); r.code != 0 {
					t.Fatalf("the command could not plant its attack: exit %d %s", r.code, r.stderr)
				}
				path := filepath.Join(w, a.rel)
				target := path
				if a.target != "" {
					target = filepath.Join(out, a.target)
				}
				state := func() string {
					b, err := os.ReadFile(target)
					if err != nil {
						return "absent"
					}
					return string(b)
				}
				before := state()

				r := run(t, "", "run", "--workdir", w, "--"+flag, path, "--", "true")
				oneLine(t, r, "--"+flag, path, "fix:")
				if after := state(); after != before {
					t.Errorf("the refused run changed %s: %q, was %q", target, after, before)
				}

				// Control: a naive opener on the same path reaches the target.
				switch flag {
				case "report":
					if err := os.WriteFile(path, []byte("NAIVE\n"), 0o644); err != nil {
						t.Fatalf("control: naive write: %v (untested)", err)
					}
				case "audit":
					f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
					if err != nil {
						t.Fatalf("control: naive append: %v (untested)", err)
					}
					f.WriteString("NAIVE\n")
					f.Close()
				case "config":
					b, err := os.ReadFile(path)
					if err != nil || string(b) != before {
						t.Fatalf("control: naive read got %q, %v; want the target's %q (untested)", b, err, before)
					}
				}
				if flag != "config" && !strings.Contains(state(), "NAIVE") {
					t.Fatalf("control: the naive opener did not reach %s (untested): %q", target, state())
				}
			})
		}
	}
}

// TestReportPathWithLinkOutsideWorkdir: a --report path outside every
// writable dir whose directory is a symbolic link is refused, not followed;
// the control writes through it.
func TestReportPathWithLinkOutsideWorkdir(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	out := t.TempDir()
	mustMkdir(t, filepath.Join(out, "real"))
	if err := os.Symlink(filepath.Join(out, "real"), filepath.Join(out, "link")); err != nil {
		t.Fatal(err)
	}
	rep := filepath.Join(out, "link", "r.json")
	r := run(t, "", "run", "--workdir", w, "--report", rep, "--", "true")
	oneLine(t, r, "--report", rep, "symbolic link", "fix:")
	if _, err := os.Lstat(filepath.Join(out, "real", "r.json")); err == nil {
		t.Fatal("the report was written through the link")
	}
	if err := os.WriteFile(rep, []byte("x"), 0o644); err != nil {
		t.Fatalf("control: %v (untested)", err)
	}
	if _, err := os.Lstat(filepath.Join(out, "real", "r.json")); err != nil {
		t.Fatalf("control: the naive write did not land through the link (untested): %v", err)
	}
}

// TestReportDirSwappedDuringRun: the report's directory, outside the
// workdir, is replaced by a link to another directory while the command
// runs. The report is not written through it: sandbox-run says so and exits
// 125. The control: a naive write after the swap lands in the other
// directory.
func TestReportDirSwappedDuringRun(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	out := t.TempDir()
	sub, other := filepath.Join(out, "sub"), filepath.Join(out, "other")
	mustMkdir(t, sub)
	mustMkdir(t, other)
	rep := filepath.Join(sub, "r.json")
	// The command waits (at most 10 s) for the test's go-ahead in its workdir.
	script := `touch started; i=0; while [ ! -e go ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; [ -e go ] || exit 9`
	done := make(chan result, 1)
	go func() { done <- run(t, "", "run", "--workdir", w, "--report", rep, "--", "sh", "-c", script) }()
	// The swap comes once the command runs, after every check at start.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Lstat(filepath.Join(w, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command never started: %+v", <-done)
		}
	}
	if err := os.Rename(sub, sub+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, sub); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(w, "go"), "")
	sandboxtest.Chown(t, filepath.Join(w, "go"))
	r := <-done
	if r.code != 125 || !strings.Contains(r.stderr, "cannot write the report") {
		t.Fatalf("exit %d, stderr %q; want 125 and \"cannot write the report\"", r.code, r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(other, "r.json")); err == nil {
		t.Fatal("the report was written through the swapped-in link")
	}
	if err := os.WriteFile(rep, []byte("x"), 0o644); err != nil {
		t.Fatalf("control: %v (untested)", err)
	}
	if _, err := os.Lstat(filepath.Join(other, "r.json")); err != nil {
		t.Fatalf("control: a naive write did not follow the swap (untested): %v", err)
	}
}

// TestWorkdirExposingHomeRefused: with HOME pointing at a home of the
// test's, --workdir $HOME and --workdir ~/.config/proj are refused (125, one
// line, the reason and a fix), while ~/proj works (the control: the
// command runs and writes there).
func TestWorkdirExposingHomeRefused(t *testing.T) {
	needBwrap(t)
	home := filepath.Join(sandboxtest.WorkDir(t), "home")
	for _, d := range []string{home, filepath.Join(home, ".config", "proj"), filepath.Join(home, "proj")} {
		mustMkdir(t, d)
		sandboxtest.Chown(t, d)
	}
	env := []string{"HOME=" + home, "XDG_CACHE_HOME="}
	for _, tt := range []struct {
		workdir string
		want    []string
	}{
		{home, []string{home, "home directory", "fix: use a project directory"}},
		{filepath.Join(home, ".config", "proj"), []string{home + "/.config", "dot-directory", "fix:"}},
		{filepath.Join(home, ".config"), []string{"dot-directory", "fix:"}},
		{filepath.Dir(home), []string{"holds your home", "fix:"}},
	} {
		r := runEnv(t, env, "", "run", "--workdir", tt.workdir, "--", "touch", "ran")
		oneLine(t, r, tt.want...)
		if _, err := os.Stat(filepath.Join(tt.workdir, "ran")); err == nil {
			t.Errorf("--workdir %s: the command ran", tt.workdir)
		}
	}
	proj := filepath.Join(home, "proj")
	r := runEnv(t, env, "", "run", "--workdir", proj, "--", "touch", "ran")
	if r.code != 0 {
		t.Fatalf("control: --workdir %s: exit %d %s", proj, r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(proj, "ran")); err != nil {
		t.Fatalf("control: the command did not run in %s: %v", proj, err)
	}
}
