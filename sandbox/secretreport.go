package sandbox

import (
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// secretsReport lists p's secrets and its LLM key for the report.
func secretsReport(p policy.Policy) []report.SecretReport {
	var out []report.SecretReport
	for _, s := range p.Secrets {
		kind, where := s.Source()
		out = append(out, report.SecretReport{Name: s.Name, Hosts: s.Hosts, From: kind + ":" + where, InBody: s.InBody, By: "egress proxy"})
	}
	if k := p.LLMKeyEnv; k != "" {
		r := report.SecretReport{Name: k, From: "env:" + k, By: "llm relay"}
		if p.LLMSocket == "" {
			h, _ := policy.LLMProviderHost(k)
			r.Hosts, r.By = []string{h}, "egress proxy"
		}
		out = append(out, r)
	}
	return out
}

// secretNames lists the names of rs; nil for none.
func secretNames(rs []report.SecretReport) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}
