package hostwalk

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestFindGit: the walk finds git directories at depth, bare repositories,
// submodules and worktrees inside one, .git files and their targets, and
// links (which it does not follow); a writable dir that is a git directory
// counts.
func TestFindGit(t *testing.T) {
	w, m := t.TempDir(), t.TempDir()
	mkGit := func(d string) {
		os.MkdirAll(filepath.Join(d, "objects"), 0o755)
		os.MkdirAll(filepath.Join(d, "refs"), 0o755)
		os.WriteFile(filepath.Join(d, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	}
	mkGit(filepath.Join(w, ".git"))
	mkGit(filepath.Join(w, ".git/modules/lib/sub"))
	mkGit(filepath.Join(w, ".git/worktrees/wt"))
	mkGit(filepath.Join(w, "a/b/c/.git"))
	mkGit(filepath.Join(w, "bare.git"))
	mkGit(filepath.Join(m, ".git"))
	os.MkdirAll(filepath.Join(w, "wt"), 0o755)
	os.WriteFile(filepath.Join(w, "wt/.git"), []byte("gitdir: ../.git/worktrees/wt\n"), 0o644)
	os.MkdirAll(filepath.Join(w, "l"), 0o755)
	os.Symlink(filepath.Join(m, ".git"), filepath.Join(w, "l/.git"))
	os.Symlink(m, filepath.Join(w, "follow-me")) // never walked

	g := FindGit([]string{w, filepath.Join(m, ".git")}, Bounds{})
	wantDirs := []string{filepath.Join(m, ".git"), filepath.Join(w, ".git"), filepath.Join(w, ".git/modules/lib/sub"),
		filepath.Join(w, ".git/worktrees/wt"), filepath.Join(w, "a/b/c/.git"), filepath.Join(w, "bare.git")}
	slices.Sort(wantDirs)
	if !reflect.DeepEqual(g.Dirs, wantDirs) {
		t.Errorf("dirs:\n got %v\nwant %v", g.Dirs, wantDirs)
	}
	if !reflect.DeepEqual(g.Files, []string{filepath.Join(w, "wt/.git")}) {
		t.Errorf("files: %v", g.Files)
	}
	if !reflect.DeepEqual(g.Links, []string{filepath.Join(w, "l/.git")}) {
		t.Errorf("links: %v", g.Links)
	}
	if !g.Report.Complete || g.Report.GitDirs != len(wantDirs) {
		t.Errorf("report: %+v", g.Report)
	}
}

// TestFindGitReportsWhatItSkips: a directory past the depth bound is named
// with its reason and the walk says it is incomplete.
func TestFindGitReportsWhatItSkips(t *testing.T) {
	w := t.TempDir()
	deep := filepath.Join(w, strings.Repeat("d/", MaxDepth+1))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	g := FindGit([]string{w}, Bounds{})
	if g.Report.Complete || len(g.Report.Skipped) != 1 || !strings.Contains(g.Report.Skipped[0], "deeper than") {
		t.Errorf("report: %+v", g.Report)
	}
}

// TestFindGitGoneIsComplete: a writable directory removed since its run
// (a test's temporary directory, a deleted checkout) or turned into a
// file holds nothing git could read, so the sweep over it is complete:
// an ended run's journal naming it must not make later runs exit 125.
// Control: an unreadable directory is still incomplete.
func TestFindGitGoneIsComplete(t *testing.T) {
	w := t.TempDir()
	file := filepath.Join(w, "file")
	sandboxtest.WriteFile(t, file, "x")
	g := FindGit([]string{filepath.Join(w, "gone"), file}, Bounds{})
	if !g.Report.Complete {
		t.Errorf("a missing and a non-directory writable dir: report %+v, want complete", g.Report)
	}
	if os.Geteuid() == 0 {
		return // root reads a 0o000 directory: no control
	}
	closed := filepath.Join(w, "closed")
	if err := os.Mkdir(closed, 0); err != nil {
		t.Fatal(err)
	}
	if g := FindGit([]string{closed}, Bounds{}); g.Report.Complete {
		t.Errorf("control: an unreadable directory walked as complete: %+v", g.Report)
	}
}

// TestFindGitEntriesBound: past the entries bound the walk says it is
// incomplete and names what it did not walk; a repository there is not
// found. Control: under the default bound the same tree is walked whole
// and the repository found.
func TestFindGitEntriesBound(t *testing.T) {
	w := t.TempDir()
	for i := range 10 {
		os.MkdirAll(filepath.Join(w, fmt.Sprintf("d%d/e", i)), 0o755)
	}
	repo := filepath.Join(w, "d0/e/r/.git")
	for _, d := range []string{"objects", "refs"} {
		os.MkdirAll(filepath.Join(repo, d), 0o755)
	}
	os.WriteFile(filepath.Join(repo, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	whole := FindGit([]string{w}, Bounds{})
	if !whole.Report.Complete || !slices.Contains(whole.Dirs, repo) {
		t.Fatalf("control: default bound: %+v, dirs %v", whole.Report, whole.Dirs)
	}
	for _, n := range []int{5, 15} {
		g := FindGit([]string{w}, Bounds{Entries: n})
		if g.Report.Complete || len(g.Report.Skipped) == 0 || slices.Contains(g.Dirs, repo) {
			t.Errorf("bound %d: %+v, dirs %v; want incomplete, the repository not found", n, g.Report, g.Dirs)
		}
	}
}
