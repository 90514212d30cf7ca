package pathguard

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestStaleMemoCannotOpenElsewhere: a memo is a snapshot, and a stale one
// makes Resolution.Open fail, never open another file. The control: the
// same change seen by a fresh walk opens what is there now.
func TestStaleMemoCannotOpenElsewhere(t *testing.T) {
	d := realTempDir(t)
	f := filepath.Join(d, "f")
	if err := os.WriteFile(f, []byte("checked"), 0o644); err != nil {
		t.Fatal(err)
	}
	rv := NewResolver()
	if _, err := rv.Resolve(f); err != nil {
		t.Fatal(err)
	}
	// Renamed over: the memo still holds the checked inode.
	if err := os.WriteFile(f+".new", []byte("swapped"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(f+".new", f); err != nil {
		t.Fatal(err)
	}
	stale, err := rv.Resolve(f)
	if err != nil {
		t.Fatal(err)
	}
	if fh, err := stale.Open(); !errors.Is(err, ErrChanged) {
		if fh != nil {
			fh.Close()
		}
		t.Errorf("stale file: Open gave %v, want ErrChanged", err)
	}
	fresh, err := Resolve(f)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := fresh.Open()
	if err != nil {
		t.Fatalf("control: a fresh walk cannot open the new file: %v", err)
	}
	fh.Close()

	// A directory the memo knows swapped for a link: the walk goes on
	// through the link unawares, and Open, which follows no link, fails.
	dir, elsewhere := filepath.Join(d, "dir"), filepath.Join(d, "elsewhere")
	for _, p := range []string{dir, elsewhere} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(elsewhere, "g"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.Resolve(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, dir); err != nil {
		t.Fatal(err)
	}
	stale, err = rv.Resolve(filepath.Join(dir, "g"))
	if err != nil || !stale.Exists {
		t.Fatalf("through the stale directory: %+v, %v", stale, err)
	}
	if fh, err := stale.Open(); err == nil {
		fh.Close()
		t.Errorf("Open of %s through a link the memo did not see succeeded", stale.Path)
	}
	fresh, err = Resolve(filepath.Join(dir, "g"))
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Path != filepath.Join(elsewhere, "g") {
		t.Fatalf("control: a fresh walk resolved %s", fresh.Path)
	}
	fh, err = fresh.Open()
	if err != nil {
		t.Fatalf("control: a fresh walk cannot open %s: %v", fresh.Path, err)
	}
	fh.Close()
}
