package bwrap

import (
	"os"

	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// without returns help text with the given options' lines removed: a
// synthetic older bwrap, derived from the real Debian 0.8.0 output.
func without(t *testing.T, opts ...string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/help-0.8.0-debian.txt")
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
outer:
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for _, o := range opts {
			if len(f) > 0 && f[0] == o {
				continue outer
			}
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}

func TestParseFeatureSets(t *testing.T) {
	tests := []struct {
		name, version string
		help          string
		want          Features
		advisories    []string
	}{
		{
			name: "debian 0.8.0 with backported fd binds", version: "bubblewrap 0.8.0\n",
			help:       without(t),
			want:       Features{Args: true, ClearEnv: true, DisableUserns: true, BindFD: true, InfoFD: true, AsPid1: true, Size: true, Perms: true, UnshareCgroupTry: true, Seccomp: true},
			advisories: []string{"symlink-mount-redirect"},
		},
		{
			name: "upstream 0.8.0 without fd binds", version: "bubblewrap 0.8.0\n",
			help:       without(t, "--bind-fd", "--ro-bind-fd"),
			want:       Features{Args: true, ClearEnv: true, DisableUserns: true, InfoFD: true, AsPid1: true, Size: true, Perms: true, UnshareCgroupTry: true, Seccomp: true},
			advisories: []string{"symlink-mount-redirect", "binds-by-path"},
		},
		{
			// --size came with 0.7.0 (bubblewrap PR #509, merged 2022-10-26;
			// v0.6.2's bubblewrap.c has no "--size"); --perms and --chmod
			// with 0.5.0.
			name: "0.6 (no --disable-userns, no --size)", version: "bubblewrap 0.6.2\n",
			help:       without(t, "--bind-fd", "--ro-bind-fd", "--disable-userns", "--assert-userns-disabled", "--size"),
			want:       Features{Args: true, ClearEnv: true, InfoFD: true, AsPid1: true, Perms: true, UnshareCgroupTry: true, Seccomp: true},
			advisories: []string{"symlink-mount-redirect", "no-disable-userns", "binds-by-path"},
		},
		{
			name: "0.4 (RHEL 8, Ubuntu 20.04: no --clearenv)", version: "bubblewrap 0.4.0\n",
			help:       without(t, "--bind-fd", "--ro-bind-fd", "--disable-userns", "--assert-userns-disabled", "--clearenv", "--size", "--perms", "--chmod"),
			want:       Features{Args: true, InfoFD: true, AsPid1: true, UnshareCgroupTry: true, Seccomp: true},
			advisories: []string{"symlink-mount-redirect", "no-disable-userns", "no-clearenv", "binds-by-path"},
		},
		{
			name: "0.12 with the fix", version: "bubblewrap 0.12.0\n",
			help: without(t),
			want: Features{Args: true, ClearEnv: true, DisableUserns: true, BindFD: true, InfoFD: true, AsPid1: true, Size: true, Perms: true, UnshareCgroupTry: true, Seccomp: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := Parse("/usr/bin/bwrap", tt.version, tt.help)
			if err != nil {
				t.Fatal(err)
			}
			if info.Features != tt.want {
				t.Errorf("features:\n got %+v\nwant %+v", info.Features, tt.want)
			}
			var ids []string
			for _, a := range info.Advisories() {
				ids = append(ids, a.ID)
				if a.Fix == "" || a.Detail == "" {
					t.Errorf("advisory %s lacks detail or fix", a.ID)
				}
			}
			if strings.Join(ids, ",") != strings.Join(tt.advisories, ",") {
				t.Errorf("advisories = %v, want %v", ids, tt.advisories)
			}
			if err := info.Required(); err != nil {
				t.Errorf("Required: %v", err)
			}
		})
	}
}

func TestParseRefusesGarbage(t *testing.T) {
	for _, v := range []string{"", "flatpak 1.0", "bubblewrap x.y"} {
		if _, err := Parse("/x", v, ""); err == nil {
			t.Errorf("Parse(%q) = nil error", v)
		}
	}
}

func TestRequiredNamesMissing(t *testing.T) {
	info, err := Parse("/x", "bubblewrap 0.3.0", without(t, "--args", "--info-fd"))
	if err != nil {
		t.Fatal(err)
	}
	err = info.Required()
	if err == nil || !strings.Contains(err.Error(), "--args") || !strings.Contains(err.Error(), "--info-fd") {
		t.Fatalf("Required() = %v, want it to name --args and --info-fd", err)
	}
}

func TestDetectRealBinary(t *testing.T) {
	path := sandboxtest.Bwrap(t)
	info, err := Detect(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Features.Args || !info.Features.Seccomp {
		t.Fatalf("real bwrap features = %+v", info.Features)
	}
}
