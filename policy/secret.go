package policy

import (
	"fmt"
	"regexp"
	"strings"
)

// Secret is a credential that stays outside the sandbox: inside, the
// variable Name holds a random placeholder of the credential's shape, and
// the built-in egress proxy swaps the placeholder for the real value only
// in requests over TLS to Hosts (see the proxy/secret package). A policy
// never holds the value itself: From says where the run reads it when it
// starts.
type Secret struct {
	// Name is the variable that holds the placeholder inside.
	Name string `json:"name"`
	// Hosts are the host names, each with an optional :port (443 when
	// none), the credential is bound to; the proxy terminates TLS for
	// each.
	Hosts []string `json:"hosts"`
	// From is where the value is read: "env:VAR" (the caller's
	// environment) or "file:PATH" (absolute; opened by the host-side rules:
	// never in or through a writable directory, never through a link).
	// Empty means env:Name.
	From string `json:"from,omitempty"`
	// InBody also swaps the placeholder in request bodies (bounded).
	InBody bool `json:"in_body,omitempty"`
}

// Source returns where the value of s is read: "env" or "file" and the
// variable's name or the file's path.
func (s Secret) Source() (kind, where string) {
	if s.From == "" {
		return "env", s.Name
	}
	kind, where, _ = strings.Cut(s.From, ":")
	return kind, where
}

// LLMProviderHosts maps the variables --llm-key-env knows without an LLM
// socket to the provider's API host, which the key is bound to as a
// secret.
var llmProviderHosts = map[string]string{
	"ANTHROPIC_API_KEY": "api.anthropic.com",
	"OPENAI_API_KEY":    "api.openai.com",
}

// LLMProviderHost returns the API host of the provider whose key variable
// is name, and false when sandbox-run knows none.
func LLMProviderHost(name string) (string, bool) {
	h, ok := llmProviderHosts[name]
	return h, ok
}

// secretHostRE is a secret's host: a name or an IPv4 address, with an
// optional port. No wildcard: the proxy terminates named hosts only.
var secretHostRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?(:[1-9][0-9]{0,4})?$`)

// reservedSecretNames are variables sandbox-run sets itself or that
// decide how the command runs: a placeholder there would break the run.
var reservedSecretNames = map[string]bool{"PATH": true, "HOME": true, "TMPDIR": true, "TERM": true, "USER": true, "SHELL": true,
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true, "NO_PROXY": true, "SANDBOX_LLM_URL": true}

// validateSecrets checks Secrets and LLMKeyEnv: names are variables that
// nothing else of the policy sets (Env, PassEnv, LLMEnv: the placeholder
// would be overwritten, or the real value passed in), each named once;
// hosts are host names; From names a variable or an absolute file, never
// a value; and the swap needs the built-in proxy, which tier 0 and a
// node-wide proxy do not have.
func (p Policy) validateSecrets() error {
	seen := map[string]bool{}
	names := make([]string, 0, len(p.Secrets)+1)
	for _, s := range p.Secrets {
		if err := p.checkSecret(s); err != nil {
			return err
		}
		names = append(names, s.Name)
	}
	if p.LLMKeyEnv != "" {
		if err := p.checkSecretName("llm-key-env", p.LLMKeyEnv); err != nil {
			return err
		}
		if _, known := LLMProviderHost(p.LLMKeyEnv); !known && p.LLMSocket == "" {
			return invalid("llm-key-env", fmt.Sprintf("%s is not a provider key sandbox-run knows (ANTHROPIC_API_KEY, OPENAI_API_KEY), and there is no --llm-socket", p.LLMKeyEnv),
				"pass --llm-socket PATH, or bind the key to its provider's host with --secret "+p.LLMKeyEnv+"@HOST")
		}
		names = append(names, p.LLMKeyEnv)
	}
	for _, n := range names {
		if seen[n] {
			return invalid("secret", n+" is bound twice", "bind a credential once, to all its hosts: --secret "+n+"@HOST,HOST")
		}
		seen[n] = true
	}
	if len(names) == 0 {
		return nil
	}
	if p.Sandbox == ModeOff {
		return invalid("secret", "tier 0 (--sandbox off) has no egress proxy to swap a secret in", "run in a sandbox (leave out --sandbox off)")
	}
	viaProxy := len(p.Secrets) > 0 || p.LLMSocket == ""
	if viaProxy && p.EgressSocket != "" {
		return invalid("secret", "a node-wide egress proxy (--egress-socket) does not hold this run's secrets", "use the built-in proxy (--allow-host) for a run with --secret")
	}
	if viaProxy && len(p.AllowHosts) == 0 {
		return invalid("secret", "a secret bound to a host needs egress to it, and the run has none", "allow its hosts: --allow-host HOST")
	}
	return nil
}

func (p Policy) checkSecret(s Secret) error {
	if err := p.checkSecretName("secret", s.Name); err != nil {
		return err
	}
	if len(s.Hosts) == 0 {
		return invalid("secret", s.Name+" is bound to no host", "write --secret "+s.Name+"@HOST[,HOST...]")
	}
	for _, h := range s.Hosts {
		if !secretHostRE.MatchString(h) {
			return invalid("secret", fmt.Sprintf("%s: %q is not a host name with an optional :port (no wildcard: the proxy terminates TLS for named hosts only)", s.Name, h), "write --secret "+s.Name+"@api.example.com")
		}
	}
	switch kind, where := s.Source(); {
	case kind == "env" && isEnvName(where):
	case kind == "file" && where != "":
		if err := checkPath("secret "+s.Name, where); err != nil {
			return err
		}
	default:
		return invalid("secret", fmt.Sprintf("%s: from must be env:VAR or file:/abs/path", s.Name),
			"name where the value is read, never the value itself: \"from\": \"env:GITHUB_TOKEN\" or \"file:/run/secrets/gh\"")
	}
	return nil
}

// checkSecretName refuses a name that is not a variable, reserved, or set
// by another field of the policy.
func (p Policy) checkSecretName(field, n string) error {
	if !isEnvName(n) {
		return invalid(field, fmt.Sprintf("%q is not a variable name", n), "name a variable of letters, digits and '_', such as GITHUB_TOKEN")
	}
	if reservedSecretNames[n] {
		return invalid(field, n+" is a variable sandbox-run sets itself", "name the secret's variable otherwise")
	}
	_, inEnv := p.Env[n]
	if inEnv || secretListed(p.PassEnv, n) || secretListed(p.LLMEnv, n) {
		return invalid(field, n+" is also set by --env, --pass-env or --llm-env, which would put another value (or the real one) inside",
			"leave "+n+" out of --env, --pass-env and --llm-env")
	}
	return nil
}

func secretListed(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// ParseSecretFlag reads one --secret value: NAME@HOST[,HOST...] (the value
// from the caller's variable NAME), or NAME=env:VAR@HOSTS or
// NAME=file:PATH@HOSTS. The hosts follow the last '@'. It checks the form
// only; Validate checks the parts.
func ParseSecretFlag(v string) (Secret, error) {
	at := strings.LastIndexByte(v, '@')
	if at < 0 {
		return Secret{}, invalid("secret", fmt.Sprintf("%q names no host", v), "write --secret NAME@HOST[,HOST...] or NAME=file:PATH@HOST")
	}
	name, hosts := v[:at], v[at+1:]
	s := Secret{Hosts: strings.Split(hosts, ",")}
	s.Name, s.From, _ = strings.Cut(name, "=")
	return s, nil
}
