package protect

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRestoreHeldEarliestCopy: of overlapping runs settled together, only
// the earliest copy of a path is put back, in either order; a later run
// copied what the earlier run's command had already changed. The control:
// without the rule, settling the earlier journal first leaves the later
// copy, the changed file, in place.
func TestRestoreHeldEarliestCopy(t *testing.T) {
	setup := func(t *testing.T) (w string, early, late *journal) {
		w = t.TempDir()
		p := filepath.Join(w, ".mcp.json")
		if err := os.WriteFile(p, []byte("changed by the second run\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		mk := func(run, body string, taken int64) *journal {
			dir := t.TempDir()
			cp := filepath.Join(dir, "copy")
			if err := os.WriteFile(cp, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			return &journal{RunID: run, Writable: []string{w}, SnapshotDir: dir, Held: []HeldCopy{{Path: p, Copy: cp, Taken: taken}}}
		}
		return w, mk("early", "original\n", 1), mk("late", "changed by the first run\n", 2)
	}
	settle := func(t *testing.T, rule bool, js ...*journal) string {
		q := &quarantine{dir: filepath.Join(t.TempDir(), "q")}
		if rule {
			q.earliest = earliestCopies(js)
		}
		for _, j := range js {
			q.restoreHeld(j)
		}
		b, err := os.ReadFile(filepath.Join(js[0].Writable[0], ".mcp.json"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if _, early, late := setup(t); settle(t, false, early, late) != "changed by the first run\n" {
		t.Fatal("untested: without the rule the later copy did not win")
	}
	for _, order := range []string{"early first", "late first"} {
		t.Run(order, func(t *testing.T) {
			_, early, late := setup(t)
			js := []*journal{early, late}
			if order == "late first" {
				js = []*journal{late, early}
			}
			if got := settle(t, true, js...); got != "original\n" {
				t.Errorf(".mcp.json after the settle: %q, want the earliest copy", got)
			}
		})
	}
}
