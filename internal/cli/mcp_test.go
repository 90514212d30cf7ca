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
		{"malformed deny-tool glob", []string{"mcp", "--workdir", wd, "--deny-tool", "[", "--", "true"}, `--deny-tool "[": "[" is not glob syntax`},
		{"class in allow-tool", []string{"mcp", "--workdir", wd, "--allow-tool", "read_[a-z]*", "--", "true"}, `--allow-tool "read_[a-z]*"`},
		{"brace in deny-prompt", []string{"mcp", "--workdir", wd, "--deny-prompt", "{a,b}", "--", "true"}, "--deny-prompt"},
		{"escape in allow-resource", []string{"mcp", "--workdir", wd, "--allow-resource", `file:///\*`, "--", "true"}, "--allow-resource"},
		{"empty deny-resource", []string{"mcp", "--workdir", wd, "--deny-resource", "", "--", "true"}, "--deny-resource: empty"},
		{"unknown server request", []string{"mcp", "--workdir", wd, "--deny-server-request", "tools/call", "--", "true"}, `--deny-server-request "tools/call"`},
		{"audit-args value", []string{"mcp", "--workdir", wd, "--audit-args=full", "--", "true"}, "--audit-args=full"},
		{"audit-args empty", []string{"mcp", "--workdir", wd, "--audit-args=", "--", "true"}, "--audit-args"},
		{"max-pending zero", []string{"mcp", "--workdir", wd, "--max-pending", "0", "--", "true"}, "--max-pending 0"},
		{"audit-line-max small", []string{"mcp", "--workdir", wd, "--audit-line-max", "100", "--", "true"}, "--audit-line-max 100"},
		{"audit-args-max huge", []string{"mcp", "--workdir", wd, "--audit-args-max", "99999999999", "--", "true"}, "--audit-args-max"},
		{"repeated max-pending", []string{"mcp", "--workdir", wd, "--max-pending", "5", "--max-pending", "6", "--", "true"}, "--max-pending"},
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
