package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/policy"
)

func TestExplainNotFound(t *testing.T) {
	host := t.TempDir()
	bin := filepath.Join(host, "bin")
	os.Mkdir(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "tool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(bin, "data"), []byte("x"), 0o644)
	p := policy.Policy{Workdir: "/w"}
	lookup := func(k string) (string, bool) { return map[string]string{"PATH": "/nonexistent:" + bin}[k], k == "PATH" }
	onInside := policy.Policy{Workdir: "/w", Env: map[string]string{"PATH": bin + ":/bin"}}
	for _, tt := range []struct {
		name    string
		cmd     string
		p       policy.Policy
		shown   func(string) bool
		want    []string // in Error(); none means unchanged
		wantFix bool
	}{
		{"not on host", "absent", p, nil, nil, false},
		{"with a slash", "./tool", p, nil, nil, false},
		{"not executable on host", "data", p, nil, nil, false},
		{"off PATH and hidden", "tool", p, func(string) bool { return false },
			[]string{"host has it at " + bin + "/tool", "not on the sandbox's PATH", "not shown", "--env PATH=" + bin + ":/usr/local/sbin", "--read " + bin}, true},
		{"off PATH, shown", "tool", p, func(string) bool { return true },
			[]string{"not on the sandbox's PATH", "--env PATH=" + bin}, true},
		{"on PATH, hidden", "tool", onInside, func(string) bool { return false },
			[]string{"not shown", "--read " + bin}, true},
		{"on PATH and shown", "tool", onInside, func(string) bool { return true }, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := &ExecError{Code: 127, Command: tt.cmd, Reason: "command not found"}
			explainNotFound(e, tt.p, lookup, tt.shown)
			got := e.Error()
			if tt.want == nil {
				if got != tt.cmd+": command not found" {
					t.Errorf("changed to %q", got)
				}
				return
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			if (e.Fix != "") != tt.wantFix || strings.Contains(got, "--read") && strings.Contains(got, "--env") && !strings.Contains(got, " and --read") {
				t.Errorf("fix %q", e.Fix)
			}
		})
	}
}
