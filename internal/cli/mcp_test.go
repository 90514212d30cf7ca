package cli

import (
	"strings"
	"testing"
)

func TestMCPRefusalsAreOneLine(t *testing.T) {
	wd := t.TempDir()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no server", []string{"mcp", "--workdir", wd}, "no server"},
		{"no server after dashes", []string{"mcp", "--workdir", wd, "--", "--"}, "no server"},
		{"empty pattern", []string{"mcp", "--workdir", wd, "--allow-tool", "", "--", "true"}, "--allow-tool"},
		{"dry run", []string{"mcp", "--workdir", wd, "--dry-run", "--", "true"}, "--dry-run"},
		{"unknown flag", []string{"mcp", "--frob", "--", "true"}, "unknown flag"},
		{"missing workdir", []string{"mcp", "--workdir", "/nonexistent/x", "--", "true"}, "does not exist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tt.args...)
			if code != ExitRefused {
				t.Fatalf("exit %d, want %d (%q)", code, ExitRefused, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "sandbox-run: ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q: want one line holding %q", stderr, tt.want)
			}
		})
	}
}
