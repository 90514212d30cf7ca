package policy

import (
	"strings"
	"testing"
)

// TestPackageManagers holds the one table of package managers against the
// presets and itself: every package manager names a preset that exists
// and has a cache entry (so --cache NAME works for each one a preset
// serves), every package-manager preset (a preset some package manager
// names) is reachable from a fetcher, no program belongs to two of them,
// and every offline setting is one NAME=VALUE that OfflineEnv carries.
// Control: a table entry with an unknown preset or no cache is caught.
func TestPackageManagers(t *testing.T) {
	if errs := checkPackageManagers(packageManagers); len(errs) > 0 {
		t.Fatalf("the table: %v", errs)
	}
	for _, bad := range []PackageManager{
		{Name: "x", Preset: "no-such-preset", Cache: map[string]string{"X": ""}},
		{Name: "y", Preset: "npm"},
	} {
		if errs := checkPackageManagers(append(PackageManagers(), bad)); len(errs) == 0 {
			t.Errorf("control: %+v passes the check", bad)
		}
	}
	env := OfflineEnv()
	for _, m := range PackageManagers() {
		for _, kv := range append(m.Offline, m.Quiet...) {
			k, v, _ := strings.Cut(kv, "=")
			if env[k] != v {
				t.Errorf("OfflineEnv()[%s] = %q, want %q (%s)", k, env[k], v, m.Name)
			}
		}
		if got := CacheEnv(m.Name, "/c"); len(got) != len(m.Cache) {
			t.Errorf("CacheEnv(%s) = %v", m.Name, got)
		}
	}
	if err := (Policy{Workdir: "/w", Caches: CacheNames()}).Validate(); err != nil {
		t.Errorf("every cache name of the table: %v", err)
	}
}

func checkPackageManagers(ms []PackageManager) []string {
	var errs []string
	fetcher, command, served := map[string]string{}, map[string]string{}, map[string]bool{}
	for _, m := range ms {
		if _, ok := LookupPreset(m.Preset); !ok {
			errs = append(errs, m.Name+": no preset "+m.Preset)
		}
		if len(m.Cache) == 0 {
			errs = append(errs, m.Name+": no cache variable")
		}
		for _, f := range m.Fetchers {
			if o, dup := fetcher[f]; dup {
				errs = append(errs, f+": a fetcher of "+o+" and "+m.Name)
			}
			fetcher[f] = m.Name
			served[m.Preset] = true
		}
		for _, c := range m.Commands {
			if o, dup := command[c]; dup {
				errs = append(errs, c+": a command of "+o+" and "+m.Name)
			}
			command[c] = m.Name
		}
		for _, kv := range append(append([]string(nil), m.Offline...), m.Quiet...) {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				errs = append(errs, m.Name+": offline setting "+kv+" is not NAME=VALUE")
			}
		}
	}
	for _, m := range ms {
		if !served[m.Preset] {
			errs = append(errs, m.Name+": preset "+m.Preset+" has no fetcher")
		}
	}
	return errs
}
