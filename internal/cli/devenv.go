package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sandbox-run/sandbox-run/allowlist"
	"github.com/sandbox-run/sandbox-run/internal/devenv"
	"github.com/sandbox-run/sandbox-run/internal/gitrepo"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// otherUID is devenv.Reachable through rv's memo when the command runs as
// another uid than sandbox-run (as root it runs as --user or 65534), nil
// otherwise.
func otherUID(rv *pathguard.Resolver) func(string) bool {
	if os.Geteuid() == 0 {
		return func(d string) bool { return devenv.Reachable(rv, d) }
	}
	return nil
}

// printOutsideRepos says, before the run, which writable directory is a
// git worktree of a repository the sandbox does not show, and the exact
// --write that shows it: git's own "not a git repository" does not say.
func printOutsideRepos(w io.Writer, p policy.Policy) {
	for _, r := range gitrepo.OutsideRepos(p) {
		fmt.Fprintf(w, "sandbox-run: note: %s is a git worktree of %s, which is outside the writable directories, so git there fails inside (\"not a git repository\"); fix: --write %s\n", r.Worktree, r.Repo, r.Repo)
	}
}

// printDeveloper is --summary's line on what of the caller's setup the
// command got: the git settings by name (never their values) and the
// toolchain directories.
func printDeveloper(w io.Writer, d *report.DeveloperReport) {
	if d == nil {
		return
	}
	id := "none"
	if len(d.GitIdentity) > 0 {
		id = strings.Join(d.GitIdentity, ", ")
	}
	tc := "none"
	if len(d.Toolchains) > 0 {
		tc = strings.Join(d.Toolchains, ":")
	}
	fmt.Fprintf(w, "  developer    git identity: %s; toolchains on PATH: %s\n", id, tc)
}

// allowListFix is the fix for a refused allow-list: that of its first
// entry allowlist refuses, or the general form.
func allowListFix(list []string) string {
	for _, e := range list {
		if _, err := allowlist.Parse([]string{e}); err != nil {
			return policy.AllowHostFix(e)
		}
	}
	return policy.AllowHostFix("")
}
