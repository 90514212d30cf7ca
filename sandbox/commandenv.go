package sandbox

import (
	"sort"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/gitrepo"
	"github.com/sandbox-run/sandbox-run/policy"
)

// commandEnv is the command's environment: the network's variables, then
// the policy's (which may override them).
func commandEnv(p policy.Policy, netEnv map[string]string, lookup func(string) (string, bool)) ([]string, error) {
	penv, err := p.Environ(lookup)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(netEnv)+len(penv))
	for k, v := range netEnv {
		m[k] = v
	}
	// git's config channel has two writers, the run's (the secrets'
	// credential helpers) and the policy's (the caller's identity): the
	// run's entries go after the policy's, neither overwriting the other.
	keys, vals := gitrepo.TakeEnvConfig(m)
	for _, kv := range penv {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	gitrepo.AppendEnvConfig(m, keys, vals)
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}
