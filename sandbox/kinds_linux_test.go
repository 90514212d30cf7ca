package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestKinds: the listing answers as lstat does, for every kind, through a
// parent that is a link, and in a directory past the bound.
func TestKinds(t *testing.T) {
	d := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(d, "f"), nil, 0o600))
	must(os.Mkdir(filepath.Join(d, "dir"), 0o700))
	must(os.Symlink("dir", filepath.Join(d, "link")))
	must(os.Symlink("nowhere", filepath.Join(d, "dangling")))
	must(os.WriteFile(filepath.Join(d, "dir", "inner"), nil, 0o600))
	big := filepath.Join(d, "big")
	must(os.Mkdir(big, 0o700))
	for i := 0; i <= kindsBound; i++ {
		must(os.WriteFile(filepath.Join(big, strconv.Itoa(i)), nil, 0o600))
	}
	var ks kinds
	for _, p := range []string{"f", "dir", "link", "dangling", "missing", "dir/inner", "dir/none",
		"link/inner", "link/none", "big/7", "big/none", "missing/deeper"} {
		p = filepath.Join(d, p)
		if got, want := ks.kind(p), lstatKind(p); got != want {
			t.Errorf("kind(%s) = %d, lstat says %d", p, got, want)
		}
	}
	// Through a link (its last component) and past the bound, nothing is
	// claimed from a listing.
	for _, p := range []string{"link/inner", "big/none"} {
		if _, ok := ks.lookup(filepath.Join(d, p)); ok {
			t.Errorf("lookup(%s) answered from a listing", p)
		}
	}
	if k, ok := ks.lookup(filepath.Join(d, "missing")); !ok || k != kindMissing {
		t.Errorf("lookup(missing) = %d, %v; want missing from the listing", k, ok)
	}
}

// TestAbsentBelow: a watched name is skipped only when its first
// component below the writable directory is absent; a link on the way,
// which neutralise must move, is never skipped. Control: the same names
// with nothing created are skipped.
func TestAbsentBelow(t *testing.T) {
	w := t.TempDir()
	watched := []string{".bashrc", ".vscode/settings.json", ".git/hooks/pre-commit"}
	var ks kinds
	for _, rel := range watched {
		if !absentBelow(&ks, w, filepath.Join(w, rel)) {
			t.Errorf("control: %s with nothing created is not skipped", rel)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(w, ".vscode")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w, ".bashrc"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ks = kinds{}
	for _, rel := range watched[:2] {
		if absentBelow(&ks, w, filepath.Join(w, rel)) {
			t.Errorf("%s was skipped though its first component exists", rel)
		}
	}
	if !absentBelow(&ks, w, filepath.Join(w, watched[2])) {
		t.Errorf("%s is skipped no more though .git is still absent", watched[2])
	}
	if absentBelow(&ks, w, "/elsewhere/.bashrc") || absentBelow(&ks, w, w) {
		t.Error("a path not below w was skipped")
	}
}

// TestKindsSeededByTheWalk: the git walk keeps the listing of each
// writable directory it starts from, and kinds seeded with it answers
// from that listing without listing the directory again: a file removed
// after the walk is still a file to the seeded kinds (the plan's one
// snapshot), while unseeded kinds, the control, looks and finds it gone.
func TestKindsSeededByTheWalk(t *testing.T) {
	d := t.TempDir()
	f := filepath.Join(d, ".bashrc")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(d, "sub"), 0o700)
	g := findGit([]string{d}, walkBounds{})
	if len(g.tops) != 1 || len(g.tops[d]) != 2 {
		t.Fatalf("walk kept %v, want the two entries of %s", g.tops, d)
	}
	os.Remove(f)
	var seeded, fresh kinds
	seeded.seed(d, g.tops[d])
	if k := seeded.kind(f); k != kindFile {
		t.Errorf("seeded: %v, want the walk's file", k)
	}
	if k := seeded.kind(filepath.Join(d, "sub")); k != kindDir {
		t.Errorf("seeded sub: %v, want a directory", k)
	}
	if k := fresh.kind(f); k != kindMissing {
		t.Errorf("control, unseeded: %v, want missing", k)
	}
}
