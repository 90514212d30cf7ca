package protect

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
)

// TestLayoutSplit: protected names are laid out in the named writable
// directories only, never in sandbox-run's own (a session's home, a
// cache), while a git directory in an own one keeps its held parts.
func TestLayoutSplit(t *testing.T) {
	w, home := t.TempDir(), t.TempDir()
	for _, d := range []string{filepath.Join(home, "repo", ".git", "objects"), filepath.Join(home, "repo", ".git", "refs"), filepath.Join(home, "repo", ".git", "hooks")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(home, ".bashrc"), filepath.Join(home, "repo", ".git", "HEAD"), filepath.Join(home, "repo", ".git", "config")} {
		if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A link where a protected name is: refused in a named directory,
	// nothing in an own one.
	if err := os.Symlink("/etc/passwd", filepath.Join(home, ".profile")); err != nil {
		t.Fatal(err)
	}
	writable := []string{w, home}
	named, own := SplitOwn(writable, []string{home})
	if !slices.Equal(named, []string{w}) || !slices.Equal(own, []string{home}) {
		t.Fatalf("SplitOwn = %v, %v", named, own)
	}
	finds := hostwalk.FindGit(writable, hostwalk.Bounds{})
	acts, err := layoutSplit(named, own, []string{".bashrc", ".profile"}, finds.Dirs, finds.Files, hostwalk.LstatKind)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Op{}
	for _, a := range acts {
		got[a.Path] = a.Op
	}
	for p, op := range map[string]Op{
		filepath.Join(w, ".bashrc"):                   Watch,
		filepath.Join(w, ".profile"):                  Watch,
		filepath.Join(home, "repo", ".git"):           Pin,
		filepath.Join(home, "repo", ".git", "config"): Hold,
		filepath.Join(home, "repo", ".git", "hooks"):  Hold,
	} {
		if g, ok := got[p]; !ok || g != op {
			t.Errorf("%s: op %v (present %v), want %v", p, g, ok, op)
		}
	}
	for _, p := range []string{filepath.Join(home, ".bashrc"), filepath.Join(home, ".profile")} {
		if _, ok := got[p]; ok {
			t.Errorf("%s laid out in the session's home: %v", p, acts)
		}
	}
	// Control: the same home as a named directory (a --home DIR) has its
	// names held, and the link refused.
	if _, err := layoutSplit([]string{w, home}, nil, []string{".bashrc", ".profile"}, finds.Dirs, finds.Files, hostwalk.LstatKind); err == nil {
		t.Errorf("a link at %s/.profile was laid out in a named directory", home)
	}
}
