package sandbox

import (
	"github.com/sandbox-run/sandbox-run/internal/devenv"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// developerReport is p's DeveloperReport, nil when p carries nothing.
func developerReport(p policy.Policy) *report.DeveloperReport {
	d := &report.DeveloperReport{GitIdentity: devenv.IdentityKeys(p.Env), Toolchains: p.Toolchains}
	if len(d.GitIdentity) == 0 && len(d.Toolchains) == 0 {
		return nil
	}
	return d
}
