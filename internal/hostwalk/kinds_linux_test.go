package hostwalk

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
	var ks Kinds
	for _, p := range []string{"f", "dir", "link", "dangling", "missing", "dir/inner", "dir/none",
		"link/inner", "link/none", "big/7", "big/none", "missing/deeper"} {
		p = filepath.Join(d, p)
		if got, want := ks.Kind(p), LstatKind(p); got != want {
			t.Errorf("kind(%s) = %d, lstat says %d", p, got, want)
		}
	}
	// Through a link (its last component) and past the bound, nothing is
	// claimed from a listing.
	for _, p := range []string{"link/inner", "big/none"} {
		if _, ok := ks.Lookup(filepath.Join(d, p)); ok {
			t.Errorf("lookup(%s) answered from a listing", p)
		}
	}
	if k, ok := ks.Lookup(filepath.Join(d, "missing")); !ok || k != KindMissing {
		t.Errorf("lookup(missing) = %d, %v; want missing from the listing", k, ok)
	}
}

// TestKindsSeededByTheWalk: the git walk keeps the listing of each
// writable directory it starts from, and Kinds seeded with it answers
// from that listing without listing the directory again: a file removed
// after the walk is still a file to the seeded Kinds (the plan's one
// snapshot), while unseeded Kinds, the control, looks and finds it gone.
func TestKindsSeededByTheWalk(t *testing.T) {
	d := t.TempDir()
	f := filepath.Join(d, ".bashrc")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(d, "sub"), 0o700)
	g := FindGit([]string{d}, Bounds{})
	if len(g.Tops) != 1 || len(g.Tops[d]) != 2 {
		t.Fatalf("walk kept %v, want the two entries of %s", g.Tops, d)
	}
	os.Remove(f)
	var seeded, fresh Kinds
	seeded.Seed(d, g.Tops[d])
	if k := seeded.Kind(f); k != KindFile {
		t.Errorf("seeded: %v, want the walk's file", k)
	}
	if k := seeded.Kind(filepath.Join(d, "sub")); k != KindDir {
		t.Errorf("seeded sub: %v, want a directory", k)
	}
	if k := fresh.Kind(f); k != KindMissing {
		t.Errorf("control, unseeded: %v, want missing", k)
	}
}

// TestTopsListedOnce: the git walk and the socket scan of a plan start
// from one opening and listing of each writable directory (ListTops): an
// entry added after the listing is seen by neither (one snapshot), while
// each walk on its own, the control, sees it. What lies below the top is
// still each walk's own.
func TestTopsListedOnce(t *testing.T) {
	d := t.TempDir()
	os.Mkdir(filepath.Join(d, "sub"), 0o700)
	tops := ListTops([]string{d}, 100)
	defer tops.Close()
	if tops[d].err != nil || len(tops[d].ents) != 1 {
		t.Fatalf("top of %s: %v %v", d, tops[d].ents, tops[d].err)
	}
	os.Mkdir(filepath.Join(d, ".git"), 0o700) // after the listing
	os.WriteFile(filepath.Join(d, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o600)
	os.Mkdir(filepath.Join(d, ".git", "objects"), 0o700)
	os.Mkdir(filepath.Join(d, ".git", "refs"), 0o700)
	g := FindGitFrom([]string{d}, Bounds{}, tops)
	if len(g.Dirs) != 0 {
		t.Errorf("the walk from the top listed %v, want nothing: the listing predates .git", g.Dirs)
	}
	if g := FindGit([]string{d}, Bounds{}); len(g.Dirs) != 1 {
		t.Errorf("control, a walk of its own: %v, want the .git", g.Dirs)
	}
	var dirs []string
	n, err := walkTree(d, DefaultScanLimits(), func(rel string, ents Dirents) error { dirs = append(dirs, rel); return nil }, tops[d])
	if err != nil || n != 1 || len(dirs) != 2 {
		t.Errorf("the scan from the top: %d entries, %v, %v; want the top's one entry and sub", n, dirs, err)
	}
	if n, err := walkTree(d, DefaultScanLimits(), func(string, Dirents) error { return nil }, nil); err != nil || n < 2 {
		t.Errorf("control, a scan of its own: %d entries, %v; want the .git too", n, err)
	}
	// Past the walk's own bound, the top is not used: the walk reads and
	// bounds it itself.
	if names, _ := tops.names(d, 0, 0); names != nil {
		t.Errorf("a top over the bound left was used: %v", names)
	}
}
