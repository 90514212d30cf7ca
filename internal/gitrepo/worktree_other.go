//go:build !linux

package gitrepo

import "github.com/sandbox-run/sandbox-run/policy"

// OutsideRepo is a git worktree whose repository lies outside every
// writable directory (see the Linux OutsideRepos).
type OutsideRepo struct {
	Worktree, Repo string
}

// OutsideRepos finds nothing here: the search is Linux's so far.
func OutsideRepos(policy.Policy) []OutsideRepo { return nil }
