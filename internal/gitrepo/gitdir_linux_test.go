package gitrepo_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/gitrepo"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/policy"
)

// gitLayout is one way to lay out repositories: make builds it under root
// and returns the directories to ask about, each with the worktrees of the
// submodules a `git status` there recurses into (relative to it).
type gitLayout struct {
	name string
	make func(t *testing.T, root string) map[string][]string
}

// mustGit is realGit that fails the test when git does.
func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, ok := sandboxtest.Git(t, dir, args...)
	if !ok {
		t.Fatalf("git %v in %s: %s", args, dir, out)
	}
	return out
}

// gitTruth is what the host's git says dir's repository is: its git and
// common directory as real paths; ok false when git finds none.
func gitTruth(t *testing.T, dir string) (gitrepo.Repo, bool) {
	t.Helper()
	out, ok := sandboxtest.Git(t, dir, "rev-parse", "--git-dir", "--git-common-dir")
	if !ok {
		return gitrepo.Repo{}, false
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("git rev-parse in %s: %q", dir, out)
	}
	abs := func(p string) string {
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatalf("git's answer %s: %v", p, err)
		}
		return r
	}
	return gitrepo.Repo{Dir: abs(lines[0]), Common: abs(lines[1])}, true
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// initRepo makes a repository with one commit at dir.
func initRepo(t *testing.T, dir string, args ...string) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	mustGit(t, dir, append([]string{"init", "-q"}, args...)...)
	mustGit(t, dir, "commit", "-q", "--allow-empty", "-m", "init")
}

// handGitDir makes a git directory by hand: HEAD (a link to refs/heads/main
// when linkHead), and objects and refs unless commondir names where they
// are.
func handGitDir(t *testing.T, d string, linkHead bool, commondir string) {
	t.Helper()
	os.MkdirAll(d, 0o755)
	if linkHead {
		symlink(t, "refs/heads/main", filepath.Join(d, "HEAD"))
	} else {
		sandboxtest.WriteFile(t, filepath.Join(d, "HEAD"), "ref: refs/heads/main\n")
	}
	if commondir != "" {
		sandboxtest.WriteFile(t, filepath.Join(d, "commondir"), commondir+"\n")
		return
	}
	os.MkdirAll(filepath.Join(d, "objects"), 0o755)
	os.MkdirAll(filepath.Join(d, "refs", "heads"), 0o755)
}

// gitLayouts is the table: every way git finds a repository that the
// sweep must find too.
func gitLayouts() []gitLayout {
	one := func(dirs ...string) map[string][]string {
		m := map[string][]string{}
		for _, d := range dirs {
			m[d] = nil
		}
		return m
	}
	return []gitLayout{
		{"no repository", func(t *testing.T, r string) map[string][]string {
			os.MkdirAll(filepath.Join(r, "plain"), 0o755)
			return one("plain")
		}},
		{"normal", func(t *testing.T, r string) map[string][]string {
			initRepo(t, filepath.Join(r, "n"))
			os.MkdirAll(filepath.Join(r, "n/sub/deeper"), 0o755)
			return one("n", "n/sub/deeper", "n/.git", "n/.git/refs")
		}},
		{"bare", func(t *testing.T, r string) map[string][]string {
			os.MkdirAll(filepath.Join(r, "b.git"), 0o755)
			mustGit(t, filepath.Join(r, "b.git"), "init", "-q", "--bare")
			return one("b.git", "b.git/refs/heads")
		}},
		{"gitfile relative", func(t *testing.T, r string) map[string][]string {
			initRepo(t, filepath.Join(r, "w"))
			os.Rename(filepath.Join(r, "w/.git"), filepath.Join(r, "store"))
			sandboxtest.WriteFile(t, filepath.Join(r, "w/.git"), "gitdir: ../store\n")
			return one("w")
		}},
		{"gitfile absolute, CRLF", func(t *testing.T, r string) map[string][]string {
			initRepo(t, filepath.Join(r, "w"))
			os.Rename(filepath.Join(r, "w/.git"), filepath.Join(r, "store"))
			sandboxtest.WriteFile(t, filepath.Join(r, "w/.git"), "gitdir: "+filepath.Join(r, "store")+"\r\n")
			return one("w")
		}},
		{"gitfile through a link and ..", func(t *testing.T, r string) map[string][]string {
			handGitDir(t, filepath.Join(r, "real/gd"), false, "")
			os.MkdirAll(filepath.Join(r, "real/sub"), 0o755)
			os.MkdirAll(filepath.Join(r, "wt"), 0o755)
			symlink(t, filepath.Join(r, "real/sub"), filepath.Join(r, "lnk"))
			handGitDir(t, filepath.Join(r, "gd"), false, "") // where a lexical clean would look
			sandboxtest.WriteFile(t, filepath.Join(r, "wt/.git"), "gitdir: ../lnk/../gd\n")
			return one("wt")
		}},
		{"symlinked HEAD", func(t *testing.T, r string) map[string][]string {
			handGitDir(t, filepath.Join(r, "h/.git"), true, "")
			handGitDir(t, filepath.Join(r, "bare"), true, "")
			return one("h", "bare")
		}},
		{"HEAD link outside refs", func(t *testing.T, r string) map[string][]string {
			initRepo(t, filepath.Join(r, "outer"))
			d := filepath.Join(r, "outer/in/.git")
			handGitDir(t, d, false, "")
			os.Remove(filepath.Join(d, "HEAD"))
			symlink(t, "../../../.git/HEAD", filepath.Join(d, "HEAD"))
			return one("outer/in")
		}},
		{"detached HEAD", func(t *testing.T, r string) map[string][]string {
			initRepo(t, filepath.Join(r, "d"))
			mustGit(t, filepath.Join(r, "d"), "checkout", "-q", "--detach")
			return one("d")
		}},
		{"commondir", func(t *testing.T, r string) map[string][]string {
			handGitDir(t, filepath.Join(r, "a/x/.git"), false, "../../../evil")
			os.MkdirAll(filepath.Join(r, "evil/objects"), 0o755)
			os.MkdirAll(filepath.Join(r, "evil/refs"), 0o755)
			sandboxtest.WriteFile(t, filepath.Join(r, "evil/config"), "[core]\n\trepositoryformatversion = 0\n")
			return one("a/x")
		}},
		{"commondir through a link", func(t *testing.T, r string) map[string][]string {
			os.MkdirAll(filepath.Join(r, "c/objects"), 0o755)
			os.MkdirAll(filepath.Join(r, "c/refs"), 0o755)
			os.MkdirAll(filepath.Join(r, "deep/er"), 0o755)
			symlink(t, filepath.Join(r, "deep/er"), filepath.Join(r, "l"))
			handGitDir(t, filepath.Join(r, "x/.git"), true, r+"/l/../../c") // not filepath.Join: that cleans ".." lexically
			return one("x")
		}},
		{"invalid .git directory falls through", func(t *testing.T, r string) map[string][]string {
			initRepo(t, filepath.Join(r, "o"))
			os.MkdirAll(filepath.Join(r, "o/in/.git"), 0o755)
			return one("o/in")
		}},
		{"malformed gitfile stops git", func(t *testing.T, r string) map[string][]string {
			initRepo(t, filepath.Join(r, "o"))
			sandboxtest.WriteFile(t, filepath.Join(r, "o/in/.git"), "gitdir:../nowhere\n")
			return one("o/in")
		}},
		{"worktree", func(t *testing.T, r string) map[string][]string {
			initRepo(t, filepath.Join(r, "main"))
			mustGit(t, filepath.Join(r, "main"), "worktree", "add", "-q", filepath.Join(r, "wt"))
			return one("wt", "main", "main/.git/worktrees/wt")
		}},
		{"submodule add", func(t *testing.T, r string) map[string][]string {
			initRepo(t, filepath.Join(r, "src"))
			initRepo(t, filepath.Join(r, "super"))
			mustGit(t, filepath.Join(r, "super"), "submodule", "add", "-q", filepath.Join(r, "src"), "lib/sm")
			mustGit(t, filepath.Join(r, "super"), "commit", "-qm", "sm")
			return map[string][]string{"super": {"lib/sm"}, "super/lib/sm": nil, "super/.git/modules/lib/sm": nil}
		}},
		{"gitlink by hand, index v4", func(t *testing.T, r string) map[string][]string {
			initRepo(t, filepath.Join(r, "s"))
			head := strings.TrimSpace(mustGit(t, filepath.Join(r, "s"), "rev-parse", "HEAD"))
			mustGit(t, filepath.Join(r, "s"), "update-index", "--index-version", "4")
			mustGit(t, filepath.Join(r, "s"), "update-index", "--add", "--cacheinfo", "160000,"+head+",aa/sm")
			handGitDir(t, filepath.Join(r, "s/.git/modules/sm"), true, "")
			os.MkdirAll(filepath.Join(r, "s/aa/sm"), 0o755)
			symlink(t, filepath.Join(r, "s/.git/modules"), filepath.Join(r, "s/lnk"))
			sandboxtest.WriteFile(t, filepath.Join(r, "s/aa/sm/.git"), "gitdir: ../../lnk/sm/../sm\n")
			return map[string][]string{"s": {"aa/sm"}}
		}},
		{"gitlink, split index, SHA-256", func(t *testing.T, r string) map[string][]string {
			initRepo(t, filepath.Join(r, "k"), "--object-format=sha256")
			initRepo(t, filepath.Join(r, "k/inner"), "--object-format=sha256")
			head := strings.TrimSpace(mustGit(t, filepath.Join(r, "k/inner"), "rev-parse", "HEAD"))
			mustGit(t, filepath.Join(r, "k"), "update-index", "--split-index")
			mustGit(t, filepath.Join(r, "k"), "update-index", "--add", "--cacheinfo", "160000,"+head+",inner")
			return map[string][]string{"k": {"inner"}}
		}},
		{"unpopulated gitlink", func(t *testing.T, r string) map[string][]string {
			initRepo(t, filepath.Join(r, "u"))
			head := strings.TrimSpace(mustGit(t, filepath.Join(r, "u"), "rev-parse", "HEAD"))
			mustGit(t, filepath.Join(r, "u"), "update-index", "--add", "--cacheinfo", "160000,"+head+",gone")
			return one("u")
		}},
		{"nested repositories", func(t *testing.T, r string) map[string][]string {
			initRepo(t, filepath.Join(r, "p"))
			initRepo(t, filepath.Join(r, "p/q"))
			initRepo(t, filepath.Join(r, "p/q/.git/hidden"))
			os.MkdirAll(filepath.Join(r, "p/x"), 0o755)
			return one("p/x", "p/q", "p/q/.git/hidden")
		}},
		{"repository inside a look-alike", func(t *testing.T, r string) map[string][]string {
			handGitDir(t, filepath.Join(r, "fake"), false, "")
			initRepo(t, filepath.Join(r, "fake/src"))
			return one("fake", "fake/src")
		}},
	}
}

// TestGitDirsAgreesWithGit: for every layout of the table, gitDirs gives,
// at each directory asked about, the git and common directory that the
// host's `git rev-parse --git-dir --git-common-dir` gives there, then those
// of each submodule git recurses into; and the sweep's walk (hostwalk.FindGit) of
// the whole tree finds every one of them, at every directory of the tree.
func TestGitDirsAgreesWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		sandboxtest.Unavailable(t, "git", "apt-get install -y git")
	}
	for _, l := range gitLayouts() {
		t.Run(l.name, func(t *testing.T) {
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			asked := l.make(t, root)
			for rel, subs := range asked {
				dir := filepath.Join(root, rel)
				var want []gitrepo.Repo
				if r, ok := gitTruth(t, dir); ok {
					want = append(want, r)
				}
				for _, s := range subs {
					r, ok := gitTruth(t, filepath.Join(dir, s))
					if !ok {
						t.Fatalf("%s: git finds no repository in the submodule %s", rel, s)
					}
					want = append(want, r)
				}
				if len(want) == 0 && !strings.HasPrefix(l.name, "no repository") && !strings.HasPrefix(l.name, "malformed") {
					t.Fatalf("%s: control: git finds no repository there (untested)", rel)
				}
				got, err := gitrepo.Discover(dir)
				if err != nil {
					t.Errorf("%s: %v", rel, err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: gitDirs = %v, git says %v", rel, got, want)
				}
			}
			sweepCovers(t, root)
		})
	}
}

// sweepCovers checks that hostwalk.FindGit on root finds, of what gitDirs returns
// at each directory below root, everything inside root.
func sweepCovers(t *testing.T, root string) {
	t.Helper()
	g := hostwalk.FindGit([]string{root}, hostwalk.Bounds{})
	if !g.Report.Complete {
		t.Fatalf("walk incomplete: %v", g.Report.Skipped)
	}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		repos, _ := gitrepo.Discover(p)
		for _, r := range repos {
			for _, x := range []string{r.Dir, r.Common} {
				if policy.Within(x, root) && !slices.Contains(g.Dirs, x) {
					t.Errorf("git in %s uses %s, which the sweep does not find (found %v)", p, x, g.Dirs)
				}
			}
		}
		return nil
	})
}
