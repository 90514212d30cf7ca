package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/allowlist"
)

func TestPresetsTable(t *testing.T) {
	want := []string{"anthropic", "cargo", "debian", "github", "go", "npm", "openai", "pip"}
	if got := PresetNames(); !reflect.DeepEqual(got, want) {
		t.Fatalf("presets %v, want %v", got, want)
	}
	for _, p := range Presets() {
		if _, err := allowlist.Parse(p.Hosts); err != nil || len(p.Hosts) == 0 {
			t.Errorf("%s: hosts %v: %v", p.Name, p.Hosts, err)
		}
		if p.What == "" {
			t.Errorf("%s: no description", p.Name)
		}
	}
}

func TestApplyPresets(t *testing.T) {
	p := Policy{Workdir: "/w", AllowHosts: []string{"example.com", "proxy.golang.org"}, Presets: []string{"go", "npm"},
		Env: map[string]string{"A": "1"}}
	q, err := ApplyPresets(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"example.com", "proxy.golang.org", "sum.golang.org", "registry.npmjs.org"}; !reflect.DeepEqual(q.AllowHosts, want) {
		t.Errorf("hosts %v, want %v", q.AllowHosts, want)
	}
	if q.Env["GOPROXY"] != "https://proxy.golang.org" || q.Env["A"] != "1" || len(p.Env) != 1 || len(p.AllowHosts) != 2 {
		t.Errorf("env %v (input %v), hosts of the input %v", q.Env, p.Env, p.AllowHosts)
	}
	// The caller's own value wins over a preset's.
	p.Env = map[string]string{"GOPROXY": "off"}
	if q, _ := ApplyPresets(p); q.Env["GOPROXY"] != "off" {
		t.Errorf("GOPROXY %q, want the caller's", q.Env["GOPROXY"])
	}
	// Control: without the preset, no host of it.
	if q, _ := ApplyPresets(Policy{Workdir: "/w"}); len(q.AllowHosts) != 0 {
		t.Errorf("hosts %v without presets", q.AllowHosts)
	}
	for _, bad := range [][]string{{"nope"}, {"npm", "npm"}} {
		_, err := ApplyPresets(Policy{Workdir: "/w", Presets: bad})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "anthropic, cargo, debian, github, go, npm, openai, pip") && bad[0] == "nope" {
			t.Errorf("%v: err %v, want a refusal listing the presets", bad, err)
		}
		if err := (Policy{Workdir: "/w", Presets: bad}).Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: Validate %v", bad, err)
		}
	}
}
