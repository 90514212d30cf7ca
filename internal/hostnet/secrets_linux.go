package hostnet

import (
	"bytes"
	"io"
	"os"
	"strconv"

	"github.com/sandbox-run/sandbox-run/internal/audit"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/gitrepo"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/proxy"
	"github.com/sandbox-run/sandbox-run/proxy/secret"
)

// maxSecretFile bounds a secret read from a file: a token, not a dump.
const maxSecretFile = 64 << 10

// loadSecrets reads the values of p's secrets and LLM key (the caller's
// variables through lookup, files by the host-side rules: never in or
// through a writable directory, never through a link) and draws their
// placeholders, which it puts in env with the git credential helper
// (secretEnv). nil when p has none. Its errors name a secret, never a
// value.
func loadSecrets(p policy.Policy, lookup func(string) (string, bool), env map[string]string) (*secret.Set, error) {
	if len(p.Secrets) == 0 && p.LLMKeyEnv == "" {
		return nil, nil
	}
	specs := make([]secret.Spec, 0, len(p.Secrets)+1)
	for _, s := range p.Secrets {
		v, err := secretValue(p, s, lookup)
		if err != nil {
			return nil, err
		}
		specs = append(specs, secret.Spec{Name: s.Name, Value: v, Hosts: s.Hosts, InBody: s.InBody})
	}
	if k := p.LLMKeyEnv; k != "" {
		v, err := secretValue(p, policy.Secret{Name: k}, lookup)
		if err != nil {
			return nil, err
		}
		sp := secret.Spec{Name: k, Value: v}
		if p.LLMSocket == "" {
			h, _ := policy.LLMProviderHost(k)
			sp.Hosts = []string{h}
		}
		specs = append(specs, sp)
	}
	set, err := secret.New(specs)
	if err != nil {
		return nil, fault.New("--secret", err.Error(), "fix the credential's variable or file")
	}
	secretEnv(env, p, set)
	return set, nil
}

func secretValue(p policy.Policy, s policy.Secret, lookup func(string) (string, bool)) (string, error) {
	kind, where := s.Source()
	if kind == "env" {
		v, ok := "", false
		if lookup != nil {
			v, ok = lookup(where)
		}
		if !ok || v == "" {
			return "", fault.New("secret "+s.Name, "the variable "+where+" is not set in sandbox-run's environment", "export "+where+" before the run")
		}
		return v, nil
	}
	g, err := pathguard.New(p.Writable())
	if err == nil {
		err = g.CheckHost(where)
	}
	if err != nil {
		return "", fault.New("secret "+s.Name+" from "+where, fault.Reason(err), "keep the credential's file outside every writable directory, named by its real path")
	}
	f, err := pathguard.OpenFile(where, os.O_RDONLY, 0)
	if err != nil {
		return "", fault.New("secret "+s.Name+" from "+where, fault.Reason(err), "name a readable file by its real path")
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil || len(b) > maxSecretFile {
		return "", fault.New("secret "+s.Name+" from "+where, "unreadable or over "+strconv.Itoa(maxSecretFile)+" bytes", "put the credential alone in the file")
	}
	return string(bytes.TrimRight(b, "\r\n")), nil
}

// secretEnv puts each credential's placeholder in env under its name, and
// for each exact host of a secret a git credential helper that answers
// with it (in GIT_CONFIG_COUNT/KEY/VALUE: nothing is written in the
// user's tree or home), so that git over HTTPS sends the placeholder as
// Basic credentials and the proxy swaps it.
func secretEnv(env map[string]string, p policy.Policy, set *secret.Set) {
	if set == nil {
		return
	}
	for _, name := range set.Names() {
		env[name], _ = set.Placeholder(name)
	}
	var keys, vals []string
	for _, s := range p.Secrets {
		k, v := secret.GitCredentialConfig(s.Name, s.Hosts)
		keys, vals = append(keys, k...), append(vals, v...)
	}
	gitrepo.AppendEnvConfig(env, keys, vals)
}

// withSecrets has the proxy of cfg terminate the secrets' hosts and swap
// them in (secret.Set.RequestHook), refuse their placeholders over plain
// HTTP, scrub echoed values from responses, and write one "secret" audit
// line per request that carried a placeholder: the names, the method, the
// host and the path, swapped or refused; never a value, a query or a
// header. cfg is returned as it is for a nil set.
func withSecrets(cfg proxy.Config, set *secret.Set, runID string) proxy.Config {
	if set == nil {
		return cfg
	}
	aw := cfg.Audit
	record := func(d secret.Decision, method, host, path string) {
		f := map[string]any{"method": method, "host": host, "path": path, "decision": "swap", "secrets": d.Swapped}
		if d.Refused != nil {
			f["decision"], f["reason"], f["secrets"] = "refuse", d.Refused.Reason, []string{d.Refused.Name}
		}
		audit.Event(aw, runID, "secret", f)
	}
	cfg.TerminateHosts = append(cfg.TerminateHosts, set.Hosts()...)
	cfg.RequestHook = set.RequestHook(true, record)
	cfg.PlainRequestHook = set.RequestHook(false, record)
	cfg.ResponseHook = set.ResponseHook()
	return cfg
}
