package check

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/bwrap"
)

func TestUsernsItem(t *testing.T) {
	ubuntu := bwrap.Host{MaxUserNamespaces: 15000, UnprivilegedUsernsClone: -1, AppArmorRestrictUserns: 1}
	loaded := func(ok bool, err error) func() (bool, error) { return func() (bool, error) { return ok, err } }
	tests := []struct {
		name   string
		h      bwrap.Host
		loaded func() (bool, error)
		status string
		fix    string // a substring of the remediation; "" = none
	}{
		{"restriction on, profile missing", ubuntu, loaded(false, nil), StatusWarn, "sandbox-run setup"},
		{"restriction on, list unreadable", ubuntu, loaded(false, os.ErrPermission), StatusWarn, "sandbox-run setup"},
		{"restriction on, profile loaded", ubuntu, loaded(true, nil), StatusOK, ""},
		{"no restriction", bwrap.Host{MaxUserNamespaces: 15000, UnprivilegedUsernsClone: -1, AppArmorRestrictUserns: -1}, nil, StatusOK, ""},
		{"userns off wins", bwrap.Host{MaxUserNamespaces: 0, UnprivilegedUsernsClone: -1, AppArmorRestrictUserns: 1}, loaded(false, nil), StatusFail, "max_user_namespaces"},
	}
	for _, tt := range tests {
		it := usernsItem(tt.h, tt.loaded)
		if it.Status != tt.status {
			t.Errorf("%s: status %s, want %s (%s)", tt.name, it.Status, tt.status, it.Summary)
		}
		if tt.fix == "" && it.Remediation != "" || !strings.Contains(it.Remediation, tt.fix) {
			t.Errorf("%s: remediation %q, want one naming %q", tt.name, it.Remediation, tt.fix)
		}
	}
}

// TestSandboxItemNamesSetup: when the sandbox-run check sets up fails
// with bwrap's AppArmor signature, check's fix is sandbox-run setup. The
// sandbox-run it runs is a FAKE that prints the refusal the real one
// prints (bwrap.Diagnose's own line for that bwrap message): no Ubuntu
// kernel is reachable here. The same bwrap message without the
// restriction is the contrast: no setup named.
func TestSandboxItemNamesSetup(t *testing.T) {
	for _, tt := range []struct {
		name      string
		restrict  int
		wantSetup bool
	}{
		{"restriction on", 1, true},
		{"restriction absent", -1, false},
	} {
		for _, msg := range []string{"bwrap: setting up uid map: Permission denied\n", "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n"} {
			err := bwrap.Diagnose(msg, 1, bwrap.Host{MaxUserNamespaces: 15000, UnprivilegedUsernsClone: 1, AppArmorRestrictUserns: tt.restrict})
			var se *bwrap.SetupError
			if !errors.As(err, &se) {
				t.Fatalf("Diagnose = %v", err)
			}
			fake := filepath.Join(t.TempDir(), "fake-sandbox-run")
			line := "sandbox-run: " + err.Error()
			script := "#!/bin/sh\n# FAKE sandbox-run\ncat >&2 <<'EOF'\n" + line + "\nEOF\nexit 125\n"
			if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			it := sandboxItem(context.Background(), fake)
			if it.Status != StatusFail || it.Remediation != se.Fix {
				t.Errorf("%s, %q: status %s, remediation %q; want fail with the refusal's fix %q", tt.name, msg, it.Status, it.Remediation, se.Fix)
			}
			if got := strings.Contains(it.Remediation, "sandbox-run setup"); got != tt.wantSetup {
				t.Errorf("%s, %q: names sandbox-run setup = %v, want %v: %s", tt.name, msg, got, tt.wantSetup, it.Remediation)
			}
		}
	}
}
