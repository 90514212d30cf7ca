package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/policy"
)

// TestPlanProtected: existing protected paths are bound onto themselves
// read-only, missing ones get placeholders that cleanup removes, and the
// directories on the way are pinned by a self-bind.
func TestPlanProtected(t *testing.T) {
	w := t.TempDir()
	os.MkdirAll(filepath.Join(w, ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(w, ".bashrc"), []byte("x"), 0o644)
	p := policy.Policy{Workdir: w}.WithDefaults()
	pl, err := newPlan(p, nil, false, 9, os.Getuid(), os.Getgid(), true)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bwrap.MountKind{}
	for _, m := range pl.mounts {
		if strings.HasPrefix(m.Dst, w) {
			kinds[m.Dst] = m.Kind
		}
	}
	for dst, want := range map[string]bwrap.MountKind{
		w: bwrap.Bind, w + "/.git": bwrap.Bind, w + "/.git/hooks": bwrap.ROBind,
		w + "/.git/config": bwrap.ROBind, w + "/.bashrc": bwrap.ROBind, w + "/.mcp.json": bwrap.ROBind, w + "/.vscode": bwrap.ROBind,
	} {
		if got, ok := kinds[dst]; !ok || got != want {
			t.Errorf("%s: mount %v (present %v), want %v", dst, got, ok, want)
		}
	}
	// Placeholders exist during the run...
	if _, err := os.Stat(filepath.Join(w, ".mcp.json")); err != nil {
		t.Errorf("no placeholder for .mcp.json: %v", err)
	}
	pl.close()
	pl.cleanup()
	// ...and are gone afterwards, while what the user had stays.
	for _, gone := range []string{".mcp.json", ".vscode", ".git/config", ".zshrc"} {
		if _, err := os.Lstat(filepath.Join(w, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("placeholder %s left behind", gone)
		}
	}
	for _, kept := range []string{".git/hooks", ".bashrc"} {
		if _, err := os.Stat(filepath.Join(w, kept)); err != nil {
			t.Errorf("%s of the user's tree was removed", kept)
		}
	}
}

func TestPlanRefusesProtectedSymlink(t *testing.T) {
	w := t.TempDir()
	os.Symlink("/etc", filepath.Join(w, ".vscode"))
	p := policy.Policy{Workdir: w}.WithDefaults()
	_, err := newPlan(p, nil, false, 9, os.Getuid(), os.Getgid(), true)
	if !errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), ".vscode") {
		t.Fatalf("newPlan = %v, want a setup error naming the link", err)
	}
	// Nothing was left behind by the partial plan.
	ents, _ := os.ReadDir(w)
	if len(ents) != 1 {
		t.Errorf("partial plan left %d entries", len(ents))
	}
}

func TestCommandEnv(t *testing.T) {
	p := policy.Policy{Workdir: "/w", Env: map[string]string{"HTTP_PROXY": "mine"}}
	env, err := commandEnv(p, map[string]string{"HTTP_PROXY": "http://127.0.0.1:3128", "HTTPS_PROXY": "http://127.0.0.1:3128"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(env, " ")
	if !strings.Contains(got, "HTTP_PROXY=mine") || !strings.Contains(got, "HTTPS_PROXY=http://127.0.0.1:3128") {
		t.Errorf("commandEnv = %s", got)
	}
}
