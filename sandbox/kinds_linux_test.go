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

// TestTopsListedOnce: the git walk and the socket scan of a plan start
// from one opening and listing of each writable directory (listTops): an
// entry added after the listing is seen by neither (one snapshot), while
// each walk on its own, the control, sees it. What lies below the top is
// still each walk's own.
func TestTopsListedOnce(t *testing.T) {
	d := t.TempDir()
	os.Mkdir(filepath.Join(d, "sub"), 0o700)
	tops := listTops([]string{d}, 100)
	defer tops.close()
	if tops[d].err != nil || len(tops[d].ents) != 1 {
		t.Fatalf("top of %s: %v %v", d, tops[d].ents, tops[d].err)
	}
	os.Mkdir(filepath.Join(d, ".git"), 0o700) // after the listing
	os.WriteFile(filepath.Join(d, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o600)
	os.Mkdir(filepath.Join(d, ".git", "objects"), 0o700)
	os.Mkdir(filepath.Join(d, ".git", "refs"), 0o700)
	g := findGitFrom([]string{d}, walkBounds{}, tops)
	if len(g.dirs) != 0 {
		t.Errorf("the walk from the top listed %v, want nothing: the listing predates .git", g.dirs)
	}
	if g := findGit([]string{d}, walkBounds{}); len(g.dirs) != 1 {
		t.Errorf("control, a walk of its own: %v, want the .git", g.dirs)
	}
	var dirs []string
	n, err := walkTree(d, defaultScanLimits, func(rel string, ents dirents) error { dirs = append(dirs, rel); return nil }, tops[d])
	if err != nil || n != 1 || len(dirs) != 2 {
		t.Errorf("the scan from the top: %d entries, %v, %v; want the top's one entry and sub", n, dirs, err)
	}
	if n, err := walkTree(d, defaultScanLimits, func(string, dirents) error { return nil }, nil); err != nil || n < 2 {
		t.Errorf("control, a scan of its own: %d entries, %v; want the .git too", n, err)
	}
	// Past the walk's own bound, the top is not used: the walk reads and
	// bounds it itself.
	if names, _ := tops.names(d, 0, 0); names != nil {
		t.Errorf("a top over the bound left was used: %v", names)
	}
}
