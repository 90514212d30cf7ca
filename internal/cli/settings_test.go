package cli

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/policy"
)

// TestSettingsFlag: --settings adds to what the profile and the flags
// say, in either format; a weakening key is refused naming it; --preset
// adds its hosts last.
func TestSettingsFlag(t *testing.T) {
	dir := t.TempDir()
	write := func(name, js string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	srt := write("srt.json", `{"network":{"allowedDomains":["github.com"],"deniedDomains":[]},"filesystem":{"denyRead":[],"allowWrite":["."],"denyWrite":[".env"]}}`)
	claude := write("claude.json", `{"sandbox":{"enabled":true,"network":{"allowedDomains":["api.example.com"]}},"permissions":{"deny":["Edit(./Makefile)"]}}`)
	weak := write("weak.json", `{"sandbox":{"allowUnsandboxedCommands":true}}`)
	for _, tt := range []struct {
		args    []string
		hosts   []string
		protect []string
		err     string
	}{
		{[]string{"--allow-host", "example.com", "--settings", srt}, []string{"example.com", "github.com"}, []string{"/cwd/.env"}, ""},
		{[]string{"--settings", claude, "--preset", "npm"}, []string{"api.example.com", "registry.npmjs.org"}, []string{"/cwd/Makefile"}, ""},
		{[]string{"--settings", weak}, nil, nil, "sandbox.allowUnsandboxedCommands"},
		{[]string{"--preset", "pypi"}, nil, nil, "anthropic, cargo, debian, github, go, npm, openai, pip"},
	} {
		f := newRunFlags()
		if err := f.fs.Parse(append([]string{"--workdir", "/cwd"}, tt.args...)); err != nil {
			t.Fatal(err)
		}
		p, err := f.policy(func() (string, error) { return "/cwd", nil })
		if tt.err != "" {
			if !errors.Is(err, policy.ErrInvalid) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%v: err %v, want one naming %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(p.AllowHosts, tt.hosts) || !reflect.DeepEqual(p.Protect, tt.protect) {
			t.Errorf("%v: hosts %v protect %v err %v; want %v %v", tt.args, p.AllowHosts, p.Protect, err, tt.hosts, tt.protect)
		}
	}
	var se *policy.SettingsError
	f := newRunFlags()
	_ = f.fs.Parse([]string{"--workdir", "/cwd", "--settings", weak})
	if _, err := f.policy(func() (string, error) { return "/cwd", nil }); !errors.As(err, &se) || !se.Weakens {
		t.Errorf("err %v, want a *policy.SettingsError that weakens", err)
	}
}
