package cli

import "testing"

func TestParseFix(t *testing.T) {
	f := newRunFlags()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--alow-host", "x", "--", "true"}, "use --allow-host (sandbox-run run --help lists every flag)"},
		{[]string{"--workdir=/w", "--memroy=1G", "true"}, "use --memory (sandbox-run run --help lists every flag)"},
		{[]string{"--frobnicate", "true"}, "see sandbox-run run --help"},
		// The command's own flags are not sandbox-run's.
		{[]string{"node", "--alow-host"}, "see sandbox-run run --help"},
	} {
		if got := parseFix(f.fs, tt.args, "run"); got != tt.want {
			t.Errorf("parseFix(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}
