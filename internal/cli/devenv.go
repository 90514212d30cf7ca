package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/sandbox-run/sandbox-run/devenv"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

// otherUID is devenv.Reachable when the command runs as another uid than
// sandbox-run (as root it runs as --user or 65534), nil otherwise.
func otherUID() func(string) bool {
	if os.Geteuid() == 0 {
		return devenv.Reachable
	}
	return nil
}

// printOutsideRepos says, before the run, which writable directory is a
// git worktree of a repository the sandbox does not show, and the exact
// --write that shows it: git's own "not a git repository" does not say.
func printOutsideRepos(w io.Writer, p policy.Policy) {
	for _, r := range sandbox.OutsideRepos(p) {
		fmt.Fprintf(w, "sandbox-run: note: %s is a git worktree of %s, which is outside the writable directories, so git there fails inside (\"not a git repository\"); fix: --write %s\n", r.Worktree, r.Repo, r.Repo)
	}
}
