package sandbox

import (
	"github.com/sandbox-run/sandbox-run/internal/devenv"
	"github.com/sandbox-run/sandbox-run/policy"
)

// DeveloperReport says what of the caller's own setup the command got
// (sandbox-run run --dev-env, package devenv). The git settings are named,
// never their values: a report is shared in CI logs and bug reports, and
// the caller's name and address are theirs, while whether the command had
// an identity is what explains a failing git commit.
type DeveloperReport struct {
	// GitIdentity lists the git settings carried in through
	// GIT_CONFIG_KEY_n (user.name, user.email, init.defaultBranch);
	// empty when none was.
	GitIdentity []string `json:"git_identity,omitempty"`
	// Toolchains are the directories put on PATH ahead of the system
	// ones, in order.
	Toolchains []string `json:"toolchains,omitempty"`
}

// developerReport is p's DeveloperReport, nil when p carries nothing.
func developerReport(p policy.Policy) *DeveloperReport {
	d := &DeveloperReport{GitIdentity: devenv.IdentityKeys(p.Env), Toolchains: p.Toolchains}
	if len(d.GitIdentity) == 0 && len(d.Toolchains) == 0 {
		return nil
	}
	return d
}
