package plan

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/policy"
)

// TestByPath: a plan by path names every path as the kernel resolves it
// (a workdir and a --write dir reached through links at their targets, a
// --read path through a link at its target, a missing --read path as
// written), splits the policy's protected paths by whether they exist,
// and refuses a writable dir that is missing or not a directory with
// what, why and the fix. Control: the links are really links, so a plan
// that kept the paths as written would fail.
func TestByPath(t *testing.T) {
	root := t.TempDir()
	real, _ := filepath.EvalSymlinks(root)
	mk := func(rel string) string {
		p := filepath.Join(real, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(target, rel string) string {
		p := filepath.Join(real, rel)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	work, out, ref := mk("work"), mk("out"), mk("ref")
	if err := os.WriteFile(filepath.Join(work, ".bashrc"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := policy.Policy{
		Workdir: link(work, "work-link"), Write: []string{link(out, "out-link")},
		Read: []string{link(ref, "ref-link"), filepath.Join(real, "missing")},
	}.WithDefaults()
	if fi, err := os.Lstat(p.Workdir); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("control: %s is not a link (%v)", p.Workdir, err)
	}
	q, ps, err := ByPath(p)
	if err != nil {
		t.Fatal(err)
	}
	if q.Workdir != work || !slices.Equal(q.Write, []string{out}) {
		t.Errorf("writable dirs %s %v, want %s [%s]", q.Workdir, q.Write, work, out)
	}
	if !slices.Equal(ps.Writable, q.Writable()) || !slices.Equal(ps.ReadOnly, []string{ref, filepath.Join(real, "missing")}) {
		t.Errorf("paths %+v", ps)
	}
	bashrc := filepath.Join(work, ".bashrc")
	if !slices.Contains(ps.Protected, bashrc) || slices.Contains(ps.Watched, bashrc) {
		t.Errorf("%s exists: want it held, got held %v", bashrc, ps.Protected)
	}
	all := append(slices.Clone(ps.Protected), ps.Watched...)
	slices.Sort(all)
	want := q.ProtectedPaths()
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Errorf("held and watched %v, want the policy's protected paths %v", all, want)
	}

	file := filepath.Join(real, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    policy.Policy
		why  string
	}{
		{"missing workdir", policy.Policy{Workdir: filepath.Join(real, "nope")}, "cannot be resolved"},
		{"file as --write", policy.Policy{Workdir: work, Write: []string{file}}, "is not a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ByPath(c.p.WithDefaults())
			var fe *fault.Error
			if !errors.As(err, &fe) || !strings.Contains(fe.Why, c.why) || fe.Fix == "" {
				t.Fatalf("got %v, want a refusal that %s, with a fix", err, c.why)
			}
		})
	}
}
