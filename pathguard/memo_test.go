package pathguard

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// realTempDir is a fresh temporary directory named by its real path, so
// that the walks below count only the components the test made.
func realTempDir(t *testing.T) string {
	t.Helper()
	r, err := Resolve(t.TempDir())
	if err != nil || !r.Exists {
		t.Fatalf("resolve the temporary directory: %v", err)
	}
	return r.Path
}

// TestResolverLooksEachComponentUpOnce: the walks of one Resolver share
// their ancestors' lookups, and answer as Resolve does. The count is
// derived from the paths, not from the machine: one Lstat per distinct
// component, one Readlink per link.
func TestResolverLooksEachComponentUpOnce(t *testing.T) {
	d := realTempDir(t)
	for _, p := range []string{"a/b/c", "a/b/x"} {
		if err := os.MkdirAll(filepath.Join(d, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a/b", filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	paths := []string{d + "/a/b/c", d + "/a/b/x", d + "/link/c", d + "/a", d + "/link"}
	rv := NewResolver()
	for _, p := range paths {
		got, err := rv.Resolve(p)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Resolve(p)
		if err != nil {
			t.Fatal(err)
		}
		if got.Path != want.Path || got.Exists != want.Exists || !slices.Equal(got.Visited, want.Visited) {
			t.Errorf("%s: through the memo %+v, without %+v", p, got, want)
		}
	}
	// "/", each component of d, then a, b, c, x and link (Lstat), and
	// link once more (Readlink).
	want := 1 + strings.Count(d, "/") + 5 + 1
	if got := rv.Calls(); got != want {
		t.Errorf("%d file system calls for %d walks, want %d (each component once)", got, len(paths), want)
	}
	for _, p := range paths {
		if _, err := rv.Resolve(p); err != nil {
			t.Fatal(err)
		}
	}
	if got := rv.Calls(); got != want {
		t.Errorf("walking the same paths again made %d calls more", got-want)
	}
	if (*Resolver)(nil).Calls() != 0 {
		t.Errorf("a nil Resolver counts calls")
	}
}

// TestResolverForgetsAbsence: a path that was missing is looked up again,
// so that what the plan creates after a walk missed it is found.
func TestResolverForgetsAbsence(t *testing.T) {
	d := realTempDir(t)
	p := filepath.Join(d, "later")
	rv := NewResolver()
	if r, err := rv.Resolve(p); err != nil || r.Exists {
		t.Fatalf("before it is made: %+v, %v", r, err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if r, err := rv.Resolve(p); err != nil || !r.Exists {
		t.Errorf("made after a walk missed it: %+v, %v", r, err)
	}
	if _, err := rv.Stat(filepath.Join(d, "never")); !os.IsNotExist(err) {
		t.Errorf("Stat of a missing path: %v, want not exist", err)
	}
}
