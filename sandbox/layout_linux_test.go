package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/gitrepo"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// layoutTree is a file tree for protectLayout: path -> kind; what is not
// listed is missing.
type layoutTree map[string]hostwalk.Kind

func (f layoutTree) kind(p string) hostwalk.Kind { return f[p] }

// TestProtectLayout: the pure layout, case by case. Nothing missing is
// ever mounted (a mount onto a missing path makes a mount point on the
// host); directories come before what they hold; nothing below a held
// path is listed.
func TestProtectLayout(t *testing.T) {
	gitParts := func(g string, have ...string) layoutTree {
		f := layoutTree{g: hostwalk.KindDir}
		for _, h := range have {
			k := hostwalk.KindFile
			if h == "hooks" || h == "info" {
				k = hostwalk.KindDir
			}
			f[filepath.Join(g, h)] = k
		}
		return f
	}
	merge := func(ts ...layoutTree) layoutTree {
		out := layoutTree{}
		for _, t := range ts {
			for k, v := range t {
				out[k] = v
			}
		}
		return out
	}
	cases := []struct {
		name     string
		writable []string
		names    []string
		tree     layoutTree
		gitDirs  []string
		gitFiles []string
		want     []string // "op path"
		err      string
	}{
		{name: "fresh workdir: everything watched, nothing mounted",
			writable: []string{"/w"}, names: []string{".mcp.json", ".vscode", ".github/workflows"},
			want: []string{"watch /w/.github/workflows", "watch /w/.mcp.json", "watch /w/.vscode"}},
		{name: "existing file and directory held, the way pinned",
			writable: []string{"/w"}, names: []string{".bashrc", ".github/workflows"},
			tree: layoutTree{"/w/.bashrc": hostwalk.KindFile, "/w/.github": hostwalk.KindDir, "/w/.github/workflows": hostwalk.KindDir},
			want: []string{"hold /w/.bashrc", "pin /w/.github", "hold /w/.github/workflows"}},
		{name: "half the way exists: pinned up to there, the rest watched",
			writable: []string{"/w"}, names: []string{".github/workflows"},
			tree: layoutTree{"/w/.github": hostwalk.KindDir},
			want: []string{"pin /w/.github", "watch /w/.github/workflows"}},
		{name: "a file where a directory is expected is held",
			writable: []string{"/w"}, names: []string{".github/workflows"},
			tree: layoutTree{"/w/.github": hostwalk.KindFile},
			want: []string{"hold /w/.github"}},
		{name: "a link is refused",
			writable: []string{"/w"}, names: []string{".vscode"},
			tree: layoutTree{"/w/.vscode": hostwalk.KindLink}, err: "/w/.vscode"},
		{name: "a link on the way is refused",
			writable: []string{"/w"}, names: []string{".github/workflows"},
			tree: layoutTree{"/w/.github": hostwalk.KindLink}, err: "/w/.github"},
		{name: "a repository: git dir pinned, its held parts held or watched",
			writable: []string{"/w"}, tree: gitParts("/w/.git", "config", "hooks"), gitDirs: []string{"/w/.git"},
			want: []string{"pin /w/.git", "watch /w/.git/commondir", "hold /w/.git/config", "watch /w/.git/config.worktree",
				"hold /w/.git/hooks", "watch /w/.git/info/attributes"}},
		{name: "a repository at depth 3: the git directory pinned, not the way to it",
			writable: []string{"/w"},
			tree:     merge(layoutTree{"/w/a": hostwalk.KindDir, "/w/a/b": hostwalk.KindDir, "/w/a/b/c": hostwalk.KindDir}, gitParts("/w/a/b/c/.git", "config", "hooks", "info", "info/attributes")),
			gitDirs:  []string{"/w/a/b/c/.git"},
			want: []string{"pin /w/a/b/c/.git", "watch /w/a/b/c/.git/commondir",
				"hold /w/a/b/c/.git/config", "watch /w/a/b/c/.git/config.worktree", "hold /w/a/b/c/.git/hooks",
				"pin /w/a/b/c/.git/info", "hold /w/a/b/c/.git/info/attributes"}},
		{name: "a writable dir that is a git directory (--write main/.git)",
			writable: []string{"/w", "/m/.git"}, tree: gitParts("/m/.git", "config", "hooks", "commondir"), gitDirs: []string{"/m/.git"},
			want: []string{"hold /m/.git/commondir", "hold /m/.git/config", "watch /m/.git/config.worktree", "hold /m/.git/hooks",
				"watch /m/.git/info/attributes"}},
		{name: "a worktree's .git file is held",
			writable: []string{"/w"}, tree: layoutTree{"/w/wt": hostwalk.KindDir, "/w/wt/.git": hostwalk.KindFile}, gitFiles: []string{"/w/wt/.git"},
			want: []string{"pin /w/wt", "hold /w/wt/.git"}},
		{name: "a git dir outside every writable dir is not laid out",
			writable: []string{"/w"}, gitDirs: []string{"/elsewhere/.git"}, want: nil},
		{name: "nothing below a held directory",
			writable: []string{"/w"}, names: []string{".claude", ".claude/settings.json"},
			tree: layoutTree{"/w/.claude": hostwalk.KindDir, "/w/.claude/settings.json": hostwalk.KindFile},
			want: []string{"hold /w/.claude"}},
		{name: "absolute --protect applies to its own writable dir only",
			writable: []string{"/w", "/o"}, names: []string{"/w/secret"}, tree: layoutTree{"/w/secret": hostwalk.KindFile},
			want: []string{"hold /w/secret"}},
		{name: "each writable dir gets the relative names",
			writable: []string{"/w", "/o"}, names: []string{".envrc"}, tree: layoutTree{"/o/.envrc": hostwalk.KindFile},
			want: []string{"hold /o/.envrc", "watch /w/.envrc"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			acts, err := protectLayout(c.writable, c.names, c.gitDirs, c.gitFiles, c.tree.kind)
			if c.err != "" {
				var le *LinkError
				if !errors.As(err, &le) || le.Path != c.err {
					t.Fatalf("err = %v, want a LinkError for %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range acts {
				got = append(got, a.String())
				if a.Op != opWatch && c.tree.kind(a.Path) == hostwalk.KindMissing {
					t.Errorf("%s: a mount onto a missing path", a)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("layout:\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

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

	g := hostwalk.FindGit([]string{w, filepath.Join(m, ".git")}, hostwalk.Bounds{})
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
	deep := filepath.Join(w, strings.Repeat("d/", hostwalk.MaxDepth+1))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	g := hostwalk.FindGit([]string{w}, hostwalk.Bounds{})
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
	g := hostwalk.FindGit([]string{filepath.Join(w, "gone"), file}, hostwalk.Bounds{})
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
	if g := hostwalk.FindGit([]string{closed}, hostwalk.Bounds{}); g.Report.Complete {
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
	whole := hostwalk.FindGit([]string{w}, hostwalk.Bounds{})
	if !whole.Report.Complete || !slices.Contains(whole.Dirs, repo) {
		t.Fatalf("control: default bound: %+v, dirs %v", whole.Report, whole.Dirs)
	}
	for _, n := range []int{5, 15} {
		g := hostwalk.FindGit([]string{w}, hostwalk.Bounds{Entries: n})
		if g.Report.Complete || len(g.Report.Skipped) == 0 || slices.Contains(g.Dirs, repo) {
			t.Errorf("bound %d: %+v, dirs %v; want incomplete, the repository not found", n, g.Report, g.Dirs)
		}
	}
}

// TestStripGitConfig: only allow-listed settings survive, in canonical
// form; anything odd is dropped, never interpreted.
func TestStripGitConfig(t *testing.T) {
	cases := []struct {
		in, want string
		dropped  bool
	}{
		{"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
			"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n", false},
		{"[core]\n\tbare = false\n\tfsmonitor = touch /tmp/x\n", "[core]\n\tbare = false\n", true},
		{"[core]\n\thooksPath = /tmp/h\n\tsshCommand = evil\n", "", true},
		{"[CORE] FsMonitor = x\n", "", true},
		{"[core] bare = false\n", "[core]\n\tbare = false\n", false},
		{"[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n\tuploadpack = evil\n",
			"[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", true},
		{"[include]\n\tpath = /tmp/evil\n[includeIf \"gitdir:/\"]\n\tpath = x\n", "", true},
		{"[filter \"x\"]\n\tclean = evil\n[alias]\n\tst = !evil\n", "", true},
		{"[submodule \"s\"]\n\turl = ../s\n\tupdate = !evil\n", "[submodule \"s\"]\n\turl = ../s\n", true},
		{"[user]\n\tname = \"quoted\"\n\temail = a@b\n", "[user]\n\temail = a@b\n", true},
		// A continued line: the value and its continuation are dropped.
		{"[core]\n\tbare = false \\\n\tfsmonitor = evil\n", "", true},
		{"[core.sub]\n\tx = 1\n", "", true},
		{"[core\n\tfsmonitor = evil\n", "", true},
		{"# comment\n; comment\n[core]\n\tsymlinks = true # c\n", "", true},
	}
	for _, c := range cases {
		got, dropped := gitrepo.StripConfig(c.in)
		if got != c.want || dropped != c.dropped {
			t.Errorf("gitrepo.StripConfig(%q) = %q, %v; want %q, %v", c.in, got, dropped, c.want, c.dropped)
		}
	}
}
