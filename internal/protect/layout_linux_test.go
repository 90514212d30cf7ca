package protect

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
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
				if a.Op != Watch && c.tree.kind(a.Path) == hostwalk.KindMissing {
					t.Errorf("%s: a mount onto a missing path", a)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("layout:\n got %q\nwant %q", got, c.want)
			}
		})
	}
}
