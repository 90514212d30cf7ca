package policy

import "strings"

// PackageManager is one package manager sandbox-run knows by name. The
// table of them (PackageManagers) is the one place that says, for each,
// which preset allows its registry, which shared cache keeps its
// downloads, which programs run it and which settings make it fail at once
// in a run without egress: the --cache names and their variables
// (Caches, CacheEnv), the offline and proxy variables of a run (sandbox),
// the no-network note (internal/cli), the not-found hint (sandbox) and
// wrap's launchers all read it, none keeps a list of its own.
type PackageManager struct {
	// Name is its cache's name (--cache NAME).
	Name string
	// Preset names the preset (Presets) that allows its registry's hosts.
	Preset string
	// Fetchers are the programs (or "python -m" modules) that fetch from
	// the registry: a failure of one of them in a run without egress
	// gets the no-network note.
	Fetchers []string
	// Commands are the toolchain's commands whose downloads the cache
	// keeps: a not-found hint for one of them names --cache Name.
	Commands []string
	// Cache maps each variable that points the tool at its cache
	// directory DIR to a suffix after DIR ("" for DIR itself).
	Cache map[string]string
	// Offline are the NAME=VALUE settings that a run without egress
	// gives it so that it fails at once instead of retrying; the
	// no-network note names them. Quiet are set with them and not named
	// (a version check, a second retry knob).
	Offline, Quiet []string
	// Proxy are its own variables for an HTTP proxy, set to the egress
	// proxy beside HTTP_PROXY and the others.
	Proxy []string
}

// packageManagers is the one table of package managers (see
// PackageManager). TestPackageManagers holds it against the presets.
var packageManagers = []PackageManager{
	{Name: "npm", Preset: "npm", Fetchers: []string{"npm", "npx", "pnpm", "yarn"}, Commands: []string{"npm", "npx", "node"},
		Cache:   map[string]string{"npm_config_cache": ""},
		Offline: []string{"npm_config_offline=true", "npm_config_fetch_retries=0"}, Quiet: []string{"npm_config_update_notifier=false"},
		Proxy: []string{"npm_config_proxy", "npm_config_https_proxy"}},
	{Name: "pip", Preset: "pip", Fetchers: []string{"pip", "pip3"}, Commands: []string{"pip", "pip3", "python", "python3"},
		Cache:   map[string]string{"PIP_CACHE_DIR": ""},
		Offline: []string{"PIP_RETRIES=0"}, Quiet: []string{"PIP_DISABLE_PIP_VERSION_CHECK=1"},
		Proxy: []string{"PIP_PROXY"}},
	{Name: "uv", Preset: "pip", Fetchers: []string{"uv", "uvx"}, Commands: []string{"uv"},
		Cache:   map[string]string{"UV_CACHE_DIR": ""},
		Offline: []string{"UV_OFFLINE=1"}},
	{Name: "go", Preset: "go", Fetchers: []string{"go"}, Commands: []string{"go", "gofmt"},
		Cache:   map[string]string{"GOMODCACHE": "/mod", "GOCACHE": "/build"},
		Offline: []string{"GOPROXY=off"}},
	{Name: "cargo", Preset: "cargo", Fetchers: []string{"cargo"}, Commands: []string{"cargo", "rustc", "rustup"},
		Cache:   map[string]string{"CARGO_HOME": ""},
		Offline: []string{"CARGO_NET_OFFLINE=true"}},
}

// PackageManagers returns the table of package managers, each a copy, in
// the table's order.
func PackageManagers() []PackageManager {
	out := make([]PackageManager, 0, len(packageManagers))
	for _, m := range packageManagers {
		out = append(out, m.clone())
	}
	return out
}

// LookupPackageManager returns the package manager whose cache is called
// name.
func LookupPackageManager(name string) (PackageManager, bool) {
	for _, m := range packageManagers {
		if m.Name == name {
			return m.clone(), true
		}
	}
	return PackageManager{}, false
}

// FetcherOf returns the package manager that program (a base name, or a
// module run with python -m) belongs to as a fetcher.
func FetcherOf(program string) (PackageManager, bool) {
	return find(program, func(m PackageManager) []string { return m.Fetchers })
}

// CommandOf returns the package manager whose toolchain has the command
// cmd (a base name).
func CommandOf(cmd string) (PackageManager, bool) {
	return find(cmd, func(m PackageManager) []string { return m.Commands })
}

func find(name string, col func(PackageManager) []string) (PackageManager, bool) {
	for _, m := range packageManagers {
		for _, n := range col(m) {
			if n == name {
				return m.clone(), true
			}
		}
	}
	return PackageManager{}, false
}

// OfflineEnv returns the variables of every package manager's Offline and
// Quiet settings, for a run without egress.
func OfflineEnv() map[string]string {
	out := map[string]string{}
	for _, m := range packageManagers {
		for _, kv := range append(append([]string(nil), m.Offline...), m.Quiet...) {
			k, v, _ := strings.Cut(kv, "=")
			out[k] = v
		}
	}
	return out
}

// ProxyVars returns every package manager's Proxy variables.
func ProxyVars() []string {
	var out []string
	for _, m := range packageManagers {
		out = append(out, m.Proxy...)
	}
	return out
}

func (m PackageManager) clone() PackageManager {
	q := m
	q.Fetchers = append([]string(nil), m.Fetchers...)
	q.Commands = append([]string(nil), m.Commands...)
	q.Offline = append([]string(nil), m.Offline...)
	q.Quiet = append([]string(nil), m.Quiet...)
	q.Proxy = append([]string(nil), m.Proxy...)
	q.Cache = make(map[string]string, len(m.Cache))
	for k, v := range m.Cache {
		q.Cache[k] = v
	}
	return q
}

// CacheNames returns the cache names Caches accepts, sorted.
func CacheNames() []string {
	out := make([]string, 0, len(packageManagers))
	for _, m := range packageManagers {
		out = append(out, m.Name)
	}
	sortStrings(out)
	return out
}

// CacheEnv returns the variables that point the tool name at its cache
// directory dir (nil for an unknown name).
func CacheEnv(name, dir string) map[string]string {
	m, ok := LookupPackageManager(name)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m.Cache))
	for k, suffix := range m.Cache {
		out[k] = dir + suffix
	}
	return out
}
