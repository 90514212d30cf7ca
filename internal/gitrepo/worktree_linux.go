package gitrepo

import (
	"os"
	"path/filepath"

	"github.com/sandbox-run/sandbox-run/policy"
)

// OutsideRepo is a git worktree among a policy's writable directories
// whose repository lies outside all of them: inside the sandbox git there
// fails with "not a git repository", since the repository is not shown.
type OutsideRepo struct {
	// Worktree is the writable directory whose .git file names the
	// repository; Repo is the repository's common git directory (the
	// main worktree's .git), the directory to pass with --write.
	Worktree, Repo string
}

// OutsideRepos finds, at the top of each writable directory of p, a .git
// file (a linked worktree's) whose repository is outside every writable
// directory. It reads the .git file as git does and nothing else; a .git
// file it cannot read is left to the run's own checks.
func OutsideRepos(p policy.Policy) []OutsideRepo {
	var out []OutsideRepo
	for _, w := range p.Writable() {
		gf := filepath.Join(w, ".git")
		if fi, err := os.Lstat(gf); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		g, err := ReadGitfile(gf)
		if err != nil {
			continue
		}
		r := repoOf(g)
		if !policy.InsideAny(r.Common, p.Writable()) {
			out = append(out, OutsideRepo{Worktree: w, Repo: r.Common})
		}
	}
	return out
}
