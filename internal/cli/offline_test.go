package cli

import (
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/report"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

func TestPrintOffline(t *testing.T) {
	for _, tt := range []struct {
		name    string
		cmd     []string
		code    int
		network string
		want    string // "" = no note
	}{
		{"npx offline", []string{"npx", "-y", "cowsay"}, 1, "none", "npx could not reach its hosts; it was set to fail at once offline (npm_config_offline=true, npm_config_fetch_retries=0); fix: if it needed the network, allow its hosts, e.g. --allow-host registry.npmjs.org"},
		{"pip by path", []string{"/usr/bin/pip3", "download", "x"}, 1, "none", "pip3 could not reach its hosts; it was set to fail at once offline (PIP_RETRIES=0)"},
		{"python -m pip", []string{"python3", "-m", "pip", "install", "x"}, 1, "none", "pip could not reach its hosts; it was set to fail at once offline (PIP_RETRIES=0); fix: if it needed the network, allow its hosts, e.g. --allow-host pypi.org --allow-host files.pythonhosted.org"},
		{"git fatal is 128", []string{"git", "clone", "https://github.com/x/y"}, 128, "none", "git could not reach its hosts; it does not retry, so it failed at once; fix: if it needed the network, allow its hosts, e.g. --allow-host github.com"},
		{"LLM channel only", []string{"curl", "http://x"}, 6, "llm only", "curl could not reach its hosts"},
		{"git fetch after -C and -c", []string{"git", "-C", "/w", "-c", "a.b=c", "fetch"}, 128, "none", "git could not reach its hosts"},
		{"git config is not the network", []string{"git", "config", "user.name", "x"}, 4, "none", ""},
		{"git -C config is not the network", []string{"git", "-C", "fetch", "config", "a.b", "c"}, 4, "none", ""},
		{"git commit is not the network", []string{"/usr/bin/git", "commit", "-m", "x"}, 128, "none", ""},
		{"success", []string{"npx", "x"}, 0, "none", ""},
		{"with egress", []string{"npx", "x"}, 1, "proxy", ""},
		{"not a network tool", []string{"make"}, 2, "none", ""},
		{"python without -m pip", []string{"python3", "x.py"}, 1, "none", ""},
		{"timeout", []string{"npx", "x"}, ExitTimeout, "none", ""},
		{"not found", []string{"npx", "x"}, ExitNotFound, "none", ""},
		{"killed by a signal", []string{"git", "fetch"}, 128 + 9, "none", ""},
		{"ended by a limit", []string{"npm", "ci"}, 1, "none", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			res := &sandbox.Result{ExitCode: tt.code, Report: report.Report{Network: tt.network}}
			if tt.name == "ended by a limit" {
				res.Report.Exit = &report.Exit{Code: tt.code, Class: report.ClassPidsLimit}
			}
			printOffline(&b, tt.cmd, res)
			got := b.String()
			switch {
			case tt.want == "" && got != "":
				t.Errorf("note %q, want none", got)
			case tt.want != "" && (!strings.HasPrefix(got, "sandbox-run: note: the sandbox has no network (no --allow-host given): ") ||
				!strings.Contains(got, tt.want) || strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, "\n")):
				t.Errorf("note %q, want one line with %q", got, tt.want)
			}
		})
	}
}
