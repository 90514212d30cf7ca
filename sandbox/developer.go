package sandbox

import (
	"github.com/sandbox-run/sandbox-run/internal/devenv"
	"github.com/sandbox-run/sandbox-run/policy"
)

// developerReport is p's DeveloperReport, nil when p carries nothing.
func developerReport(p policy.Policy) *DeveloperReport {
	d := &DeveloperReport{GitIdentity: devenv.IdentityKeys(p.Env), Toolchains: p.Toolchains}
	if len(d.GitIdentity) == 0 && len(d.Toolchains) == 0 {
		return nil
	}
	return d
}
