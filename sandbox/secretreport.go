package sandbox

import (
	"github.com/sandbox-run/sandbox-run/policy"
)

// secretsReport lists p's secrets and its LLM key for the report.
func secretsReport(p policy.Policy) []SecretReport {
	var out []SecretReport
	for _, s := range p.Secrets {
		kind, where := s.Source()
		out = append(out, SecretReport{Name: s.Name, Hosts: s.Hosts, From: kind + ":" + where, InBody: s.InBody, By: "egress proxy"})
	}
	if k := p.LLMKeyEnv; k != "" {
		r := SecretReport{Name: k, From: "env:" + k, By: "llm relay"}
		if p.LLMSocket == "" {
			h, _ := policy.LLMProviderHost(k)
			r.Hosts, r.By = []string{h}, "egress proxy"
		}
		out = append(out, r)
	}
	return out
}

// secretNames lists the names of rs; nil for none.
func secretNames(rs []SecretReport) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}
