package plan

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/policy"
)

// TestPlanProtected: existing protected paths and the held parts of a
// git directory are bound onto themselves read-only, the directories on
// the way are pinned by a writable self-bind, missing ones are watched,
// and the plan creates nothing in the user's tree.
func TestPlanProtected(t *testing.T) {
	w := t.TempDir()
	os.MkdirAll(filepath.Join(w, ".git", "hooks"), 0o755)
	os.MkdirAll(filepath.Join(w, ".git", "objects"), 0o755)
	os.MkdirAll(filepath.Join(w, ".git", "refs"), 0o755)
	os.WriteFile(filepath.Join(w, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(w, ".git", "config"), []byte("[core]\n"), 0o644)
	os.WriteFile(filepath.Join(w, ".bashrc"), []byte("x"), 0o644)
	before := fileSnapshot(t, w)
	p := policy.Policy{Workdir: w}.WithDefaults()
	pl, err := New(p, nil, false, 9, os.Getuid(), os.Getgid(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	kinds := map[string]mount.Kind{}
	for _, m := range pl.Mounts {
		if strings.HasPrefix(m.Dst, w) {
			kinds[m.Dst] = m.Kind
		}
	}
	for dst, want := range map[string]mount.Kind{
		w: mount.Bind, w + "/.git": mount.Bind, w + "/.git/hooks": mount.ROBind,
		w + "/.git/config": mount.ROBind, w + "/.bashrc": mount.ROBind,
	} {
		if got, ok := kinds[dst]; !ok || got != want {
			t.Errorf("%s: mount %v (present %v), want %v", dst, got, ok, want)
		}
	}
	for _, missing := range []string{".mcp.json", ".vscode", ".git/commondir", ".zshrc", ".github/workflows"} {
		if _, ok := kinds[filepath.Join(w, missing)]; ok {
			t.Errorf("missing %s is mounted: bwrap would create it on the host", missing)
		}
		if !slices.Contains(pl.Prot.Watched, filepath.Join(w, missing)) {
			t.Errorf("missing %s is not watched: %v", missing, pl.Prot.Watched)
		}
	}
	if after := fileSnapshot(t, w); after != before {
		t.Errorf("New changed the user's tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// fileSnapshot records what is under dir.
func fileSnapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(dir, p)
			fmt.Fprintf(&b, "%s %v %d\n", rel, fi.Mode(), fi.Size())
		}
		return nil
	})
	return b.String()
}

func TestPlanRefusesProtectedSymlink(t *testing.T) {
	w := t.TempDir()
	os.Symlink("/etc", filepath.Join(w, ".vscode"))
	p := policy.Policy{Workdir: w}.WithDefaults()
	_, err := New(p, nil, false, 9, os.Getuid(), os.Getgid(), true)
	if !errors.Is(err, fault.ErrSetup) || !strings.Contains(err.Error(), ".vscode") {
		t.Fatalf("New = %v, want a setup error naming the link", err)
	}
	// Nothing was left behind by the partial plan.
	ents, _ := os.ReadDir(w)
	if len(ents) != 1 {
		t.Errorf("partial plan left %d entries", len(ents))
	}
}

// TestPlanRefusesGitLink: a .git that is a symbolic link, at any depth, is
// refused: git follows it, and it cannot be held in place.
func TestPlanRefusesGitLink(t *testing.T) {
	w, other := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(w, "a/b"), 0o755)
	os.Symlink(other, filepath.Join(w, "a/b/.git"))
	p := policy.Policy{Workdir: w}.WithDefaults()
	_, err := New(p, nil, false, 9, os.Getuid(), os.Getgid(), true)
	if !errors.Is(err, fault.ErrSetup) || !strings.Contains(err.Error(), filepath.Join(w, "a/b/.git")) || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("New = %v, want a setup error naming the link", err)
	}
}

// Permits reads the owner's class, else the group's, else others', and
// never a broader class than the one that applies.
func TestPermits(t *testing.T) {
	for _, tt := range []struct {
		mode       uint32
		uid, gid   int
		want       uint32
		permits    bool
		whoseClass string
	}{
		{0o700, 1, 9, 7, true, "owner"},
		{0o077, 1, 2, 1, false, "owner: the group's and others' bits do not count"},
		{0o070, 5, 2, 5, true, "group"},
		{0o707, 5, 2, 1, false, "group: others' bits do not count"},
		{0o001, 5, 6, 1, true, "others"},
		{0o776, 5, 6, 1, false, "others: no execute"},
		{0o200, 1, 9, 2, true, "owner write"},
		{0o200, 1, 9, 6, false, "owner write, not read"},
	} {
		if got := Permits(tt.mode, 1, 2, tt.uid, tt.gid, tt.want); got != tt.permits {
			t.Errorf("%s: Permits(%o, uid %d, gid %d, %o) = %v", tt.whoseClass, tt.mode, tt.uid, tt.gid, tt.want, got)
		}
	}
}
