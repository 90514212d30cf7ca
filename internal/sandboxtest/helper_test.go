package sandboxtest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRunHelper re-executes this test binary: with HelperEnv naming a
// helper, the helper runs and its status is the exit status; naming none,
// the child exits 2 saying so; without the variable (the control) the tests
// run.
func TestRunHelper(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, mode  string // mode "" leaves HelperEnv unset
		code        int
		out, notOut string
	}{
		{"a helper runs, its status is the exit status", "exit-3", 3, "helper exit-3 ran", "PASS"},
		{"an unknown mode exits 2", "nonesuch", 2, `unknown helper "nonesuch"`, "PASS"},
		{"control: without the variable the tests run", "", 0, "PASS", "helper"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = os.Environ()
			if tc.mode != "" {
				cmd.Env = append(cmd.Env, HelperEnv+"="+tc.mode)
			}
			out, err := cmd.CombinedOutput()
			code := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(string(out), tc.out) || strings.Contains(string(out), tc.notOut) {
				t.Errorf("exit %d, output %q; want exit %d, output with %q and without %q", code, out, tc.code, tc.out, tc.notOut)
			}
		})
	}
}
