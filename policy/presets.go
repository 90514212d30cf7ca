package policy

import (
	"fmt"
	"sort"
	"strings"
)

// Preset is a named set of allow-list entries (and, only where the tool
// needs one to use them, variables) for a common registry or API. It adds
// access and never removes a restriction.
type Preset struct {
	Name string
	// What says in a few words what the hosts serve.
	What string
	// Hosts are allow-list entries (see allowlist.Parse): a bare host is
	// ports 80 and 443, host:443 HTTPS only.
	Hosts []string
	// Env holds variables the tool needs to go through those hosts alone;
	// nil for most presets.
	Env map[string]string
	// Note says what the preset does not do, for `sandbox-run presets`.
	Note string
}

// presets is the one table of registry and API hosts: the --preset flag,
// profiles' "presets", `sandbox-run presets`, and through the package
// managers' table (PackageManager.Preset) the no-network note after a
// package manager failed offline (internal/cli) and wrap's launchers all
// read it.
var presets = []Preset{
	{Name: "npm", What: "the npm registry (npm, npx, pnpm, yarn)", Hosts: []string{"registry.npmjs.org"}},
	{Name: "pip", What: "PyPI (pip, uv)", Hosts: []string{"pypi.org", "files.pythonhosted.org"}},
	{Name: "go", What: "the Go module proxy and checksum database", Hosts: []string{"proxy.golang.org", "sum.golang.org"},
		// A module the proxy does not hold would make go fall back to
		// fetching it with git from its origin ("direct"), a host the
		// preset does not allow: fail with the proxy's answer instead.
		Env:  map[string]string{"GOPROXY": "https://proxy.golang.org"},
		Note: "GOPROXY=https://proxy.golang.org: no direct fetch from a module's origin"},
	{Name: "cargo", What: "crates.io's sparse index and downloads", Hosts: []string{"index.crates.io", "static.crates.io"}},
	{Name: "github", What: "GitHub over HTTPS: clone, fetch, API, release and raw downloads",
		Hosts: []string{"github.com:443", "api.github.com:443", "codeload.github.com:443", "objects.githubusercontent.com:443",
			"raw.githubusercontent.com:443", "release-assets.githubusercontent.com:443"},
		Note: "read: no credential is passed; the proxy does not tell a push from a fetch, so pass no token"},
	{Name: "anthropic", What: "the Anthropic API", Hosts: []string{"api.anthropic.com:443"},
		Note: "no key is passed: add --pass-env ANTHROPIC_API_KEY or use --llm-socket"},
	{Name: "openai", What: "the OpenAI API", Hosts: []string{"api.openai.com:443"},
		Note: "no key is passed: add --pass-env OPENAI_API_KEY or use --llm-socket"},
	{Name: "debian", What: "Debian's package archives (apt)", Hosts: []string{"deb.debian.org", "security.debian.org"}},
}

// Presets returns the presets, sorted by name; each a copy.
func Presets() []Preset {
	out := make([]Preset, 0, len(presets))
	for _, p := range presets {
		out = append(out, p.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// PresetNames returns the preset names, sorted.
func PresetNames() []string {
	var out []string
	for _, p := range Presets() {
		out = append(out, p.Name)
	}
	return out
}

// LookupPreset returns the preset called name.
func LookupPreset(name string) (Preset, bool) {
	for _, p := range presets {
		if p.Name == name {
			return p.clone(), true
		}
	}
	return Preset{}, false
}

func (p Preset) clone() Preset {
	q := p
	q.Hosts = append([]string(nil), p.Hosts...)
	if p.Env != nil {
		q.Env = make(map[string]string, len(p.Env))
		for k, v := range p.Env {
			q.Env[k] = v
		}
	}
	return q
}

// validatePresets refuses an unknown or repeated preset name.
func (p Policy) validatePresets() error {
	seen := map[string]bool{}
	for _, n := range p.Presets {
		if _, ok := LookupPreset(n); !ok {
			return invalid("preset", fmt.Sprintf("%q is not a preset", n), "name one of "+strings.Join(PresetNames(), ", ")+" (sandbox-run presets shows what each allows)")
		}
		if seen[n] {
			return invalid("preset", fmt.Sprintf("%q given twice", n), "name each preset once")
		}
		seen[n] = true
	}
	return nil
}

// ApplyPresets returns a copy of p with the hosts and variables of each of
// p.Presets added: hosts not already listed appended to AllowHosts, and
// variables set in Env unless p.Env names them already (the caller's own
// value wins). Presets stays as it is, so that a report can name them. It
// refuses what Validate refuses about preset names. A Policy whose Presets
// were never applied allows none of their hosts: the omission fails closed.
func ApplyPresets(p Policy) (Policy, error) {
	if err := p.validatePresets(); err != nil {
		return p, err
	}
	q := p
	q.AllowHosts = append([]string(nil), p.AllowHosts...)
	env := copyEnv(p.Env)
	have := map[string]bool{}
	for _, h := range q.AllowHosts {
		have[h] = true
	}
	for _, n := range p.Presets {
		pr, _ := LookupPreset(n)
		for _, h := range pr.Hosts {
			if !have[h] {
				have[h] = true
				q.AllowHosts = append(q.AllowHosts, h)
			}
		}
		for k, v := range pr.Env {
			if _, set := p.Env[k]; !set {
				env[k] = v
			}
		}
	}
	if len(env) > 0 {
		q.Env = env
	}
	return q, nil
}

func copyEnv(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
