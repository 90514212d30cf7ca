package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSweepJournals: the placeholders of a run that is gone are removed
// while they are still the empty inodes it made; a live run's, and
// anything with content or replaced since, stay.
func TestSweepJournals(t *testing.T) {
	w, dir := t.TempDir(), t.TempDir()
	mk := func(name string, dir bool) string {
		p := filepath.Join(w, name)
		if err := makePlaceholder(p, dir); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gitDir, hooks, mcp := mk(".git", true), mk(".git/hooks", true), mk(".mcp.json", false)
	written, replaced := mk(".bashrc", false), mk(".profile", false)
	live := mk(".zshrc", false)

	gone, err := writeJournal(dir, "gone", []string{gitDir, hooks, mcp, written, replaced})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeJournal(dir, "live", []string{live}); err != nil {
		t.Fatal(err)
	}
	// The "gone" run: this process's pid with another start time, as a
	// reused pid would look.
	b, _ := os.ReadFile(gone)
	j := string(b)
	start, _, _ := selfStart()
	if !strings.Contains(j, `"start":`+strconv.FormatUint(start, 10)+",") {
		t.Fatalf("journal %s does not hold this process's start time", j)
	}
	j = strings.Replace(j, `"start":`+strconv.FormatUint(start, 10), `"start":`+strconv.FormatUint(start+1, 10), 1)
	if err := os.WriteFile(gone, []byte(j), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(written, []byte("mine"), 0o644)
	os.Remove(replaced)
	os.WriteFile(replaced, nil, 0o644) // empty, but not the inode the run made

	sweepJournals(dir)

	for p, want := range map[string]bool{gitDir: false, hooks: false, mcp: false, written: true, replaced: true, live: true} {
		if _, err := os.Lstat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
	if _, err := os.Stat(gone); err == nil {
		t.Error("the swept journal is still there")
	}
	if _, err := os.Stat(filepath.Join(dir, "live.json")); err != nil {
		t.Errorf("a live run's journal was swept: %v", err)
	}
}

// TestSweepIgnoresUntrustedJournals: a journal others could have written
// (it or its directory writable by group or others) is never read, so a
// forged one cannot make the sweep remove a file. The control: the same
// journal, trusted, does remove it.
func TestSweepIgnoresUntrustedJournals(t *testing.T) {
	for _, tt := range []struct {
		name  string
		forge func(dir, journal string) error
	}{
		{"journal writable by others", func(_, j string) error { return os.Chmod(j, 0o666) }},
		{"dir writable by others", func(d, _ string) error { return os.Chmod(d, 0o777) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, dir := t.TempDir(), filepath.Join(t.TempDir(), "runs")
			victim := filepath.Join(w, "empty-file-of-the-user")
			if err := os.WriteFile(victim, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			forged := func() string {
				path, err := writeJournal(dir, "forged", []string{victim})
				if err != nil {
					t.Fatal(err)
				}
				b, _ := os.ReadFile(path)
				start, _, _ := selfStart()
				j := strings.Replace(string(b), `"start":`+strconv.FormatUint(start, 10), `"start":`+strconv.FormatUint(start+1, 10), 1)
				if err := os.WriteFile(path, []byte(j), 0o600); err != nil {
					t.Fatal(err)
				}
				return path
			}
			path := forged()
			if err := tt.forge(dir, path); err != nil {
				t.Fatal(err)
			}
			sweepJournals(dir)
			if _, err := os.Lstat(victim); err != nil {
				t.Fatalf("an untrusted journal was obeyed: %v", err)
			}
			// Control: trusted, the same journal removes the file.
			forged()
			sweepJournals(dir)
			if _, err := os.Lstat(victim); err == nil {
				t.Fatal("control: a trusted journal did not remove its placeholder (untested)")
			}
		})
	}
}
