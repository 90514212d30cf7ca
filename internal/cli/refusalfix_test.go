package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefusalFixesSpecific: refusals of bad allow-list entries, in run
// and in proxy, and of a bad --exit-code-refusal, end in a fix that names
// the exact flag and value to give (or why none can), never the generic
// "correct the allow-list" or "write entries as ...".
func TestRefusalFixesSpecific(t *testing.T) {
	wd := t.TempDir()
	sock := filepath.Join(t.TempDir(), "p.sock")
	for _, tt := range []struct {
		name string
		args []string
		fix  string
		code int
	}{
		{"run localhost", []string{"run", "--workdir", wd, "--allow-host", "localhost", "--", "true"}, "fix: drop --allow-host localhost:", ExitRefused},
		{"run URL", []string{"run", "--workdir", wd, "--allow-host", "https://pypi.org/simple", "--", "true"}, "fix: --allow-host pypi.org\n", ExitRefused},
		{"run CIDR host bits", []string{"run", "--workdir", wd, "--allow-host", "10.1.2.3/8", "--", "true"}, "fix: --allow-host 10.0.0.0/8\n", ExitRefused},
		{"run refusal moved", []string{"run", "--workdir", wd, "--exit-code-refusal", "250", "--allow-host", "127.0.0.1", "--", "true"}, "fix: drop --allow-host 127.0.0.1:", 250},
		{"run bad refusal code", []string{"run", "--workdir", wd, "--exit-code-refusal", "256", "--", "true"}, "fix: e.g. --exit-code-refusal 250\n", ExitRefused},
		{"mcp refusal code", []string{"mcp", "--workdir", wd, "--exit-code-refusal", "250", "--", "true"}, "fix: leave out --exit-code-refusal\n", ExitRefused},
		{"proxy localhost", []string{"proxy", "--listen", sock, "--allow-host", "localhost:8080"}, "fix: drop --allow-host localhost:8080:", ExitRefused},
		{"proxy URL", []string{"proxy", "--listen", sock, "--allow-host", "https://example.com:8443/x"}, "fix: --allow-host example.com:8443\n", ExitRefused},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			errf, _ := os.Create(filepath.Join(dir, "err"))
			code := Run(context.Background(), tt.args, IO{Stderr: errf}, nil)
			e, _ := os.ReadFile(errf.Name())
			if code != tt.code || strings.Count(string(e), "\n") != 1 || !strings.HasPrefix(string(e), "sandbox-run: ") {
				t.Fatalf("exit %d, stderr %q: want %d and one sandbox-run line", code, e, tt.code)
			}
			if !strings.Contains(string(e), tt.fix) {
				t.Errorf("stderr %q lacks %q", e, tt.fix)
			}
			for _, generic := range []string{"correct the allow-list", "write entries as"} {
				if strings.Contains(string(e), generic) {
					t.Errorf("generic fix: %q", e)
				}
			}
		})
	}
}
