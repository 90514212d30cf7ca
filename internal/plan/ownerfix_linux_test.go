package plan

import (
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/fault"
)

func TestOwnerFix(t *testing.T) {
	for _, c := range []struct {
		owner, group int
		want         string
	}{
		{1000, 1000, "pass --user 1000:1000 (the directory's owner), or chown -R 65534:65534 /w"},
		{0, 0, "pass --map-owner (the command still runs as uid 65534;"},
		{-1, -1, "chown -R 65534:65534 /w, or pass --user UID[:GID] of the directory's owner"},
	} {
		if got := ownerFix("/w", 65534, 65534, c.owner, c.group); !strings.HasPrefix(got, c.want) {
			t.Errorf("owner %d: %q, want it to start %q", c.owner, got, c.want)
		}
	}
}

// TestNotLendable: a writable directory other than the workdir is never
// sent to --map-owner, which lends the workdir only; other errors pass.
func TestNotLendable(t *testing.T) {
	d := t.TempDir()
	err := notLendable(&fault.Error{What: "w", Why: "y", Fix: notWritableFix(d, 65534, 65534)}, d, 65534, 65534)
	if fix := err.(*fault.Error).Fix; !strings.HasPrefix(fix, "chown -R 65534:65534 "+d+" (--map-owner lends the workdir only)") {
		t.Errorf("fix %q", fix)
	}
	other := &fault.Error{What: "w", Why: "y", Fix: "chmod o+x /x"}
	if notLendable(other, d, 65534, 65534).(*fault.Error).Fix != "chmod o+x /x" {
		t.Errorf("another refusal's fix was rewritten")
	}
}
