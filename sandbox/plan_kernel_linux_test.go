package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// TestOnePlanForEveryMechanism: each Linux mechanism says what it can
// enforce here (Probe), and the skeleton builds the plan once, as its
// Host asks: bwrap, gVisor and Landlock get the same writable dirs, --read
// paths, protected paths and watched paths from the same policy, and
// differ only in how the plan is laid out (bwrap by descriptor, Landlock
// with copies of what it cannot hold); tier 0 takes none. Control: the
// protected and watched lists are not empty (a .bashrc exists, a .git
// directory's hooks do not), so the comparison could fail.
func TestOnePlanForEveryMechanism(t *testing.T) {
	sandboxtest.Bwrap(t)
	sandboxtest.Runsc(t)
	sandboxtest.Landlock(t, 1)
	w := sandboxtest.WorkDir(t)
	ro := sandboxtest.WorkDir(t)
	for _, f := range []string{".bashrc", ".git/config"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(w, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sandboxtest.Chown(t, w)
	base := policy.Policy{Workdir: w, Read: []string{ro}}.WithDefaults()
	cfg := Options{BwrapCache: t.TempDir(), Resolver: pathguard.NewResolver()}
	want := map[policy.Mode]struct{ byFD, copies bool }{
		policy.ModeBwrap: {true, false}, policy.ModeGvisor: {false, false}, policy.ModeLandlock: {false, true},
	}
	var first *plan.Plan
	for _, mode := range []policy.Mode{policy.ModeBwrap, policy.ModeGvisor, policy.ModeLandlock, policy.ModeOff} {
		p := base
		p.Sandbox = mode
		c := cfg.config(p)
		m, err := mechanisms()[mode](p, []string{"true"}, c)
		if err != nil {
			t.Fatal(err)
		}
		host, err := m.Probe(t.Context())
		if err != nil {
			t.Fatalf("%s: Probe: %v", mode, err)
		}
		pd, settle, err := planPaths(p, host, c)
		if err != nil {
			t.Fatalf("%s: planPaths: %v", mode, err)
		}
		checkPlan(t, mode, host, pd, want[mode].byFD, want[mode].copies, &first)
		m.Close(nil)
		settle(nil)
	}
}

// checkPlan checks what mode's Host asked of the plan and that the plan
// has first's lists (first is set by the first mechanism with a plan).
func checkPlan(t *testing.T, mode policy.Mode, host mechanism.Host, pd mechanism.Planned, byFD, copies bool, first **plan.Plan) {
	t.Helper()
	if mode == policy.ModeOff {
		if host.Layout != nil || pd.Plan != nil {
			t.Errorf("tier 0 asked for a plan: %+v", host.Layout)
		}
		return
	}
	if host.Layout == nil || pd.Plan == nil {
		t.Fatalf("%s asked for no plan", mode)
	}
	if !host.Ceilings {
		t.Errorf("%s does not hold the default ceilings", mode)
	}
	pl := pd.Plan
	if pl.ByFD != byFD || (pl.Prot.SnapDir != "") != copies {
		t.Errorf("%s: plan by descriptor %v, copies in %q; want %v, %v", mode, pl.ByFD, pl.Prot.SnapDir, byFD, copies)
	}
	if len(pl.Protected) == 0 || len(pl.Prot.Watched) == 0 {
		t.Fatalf("%s: protected %v, watched %v: the control wants both", mode, pl.Protected, pl.Prot.Watched)
	}
	if *first == nil {
		*first = pl
		return
	}
	f := *first
	for _, c := range []struct {
		what      string
		got, want []string
	}{
		{"writable", pl.Writable, f.Writable}, {"read-only", pl.ReadOnly, f.ReadOnly},
		{"protected", pl.Protected, f.Protected}, {"watched", pl.Prot.Watched, f.Prot.Watched},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s's %s paths %v, bwrap's %v", mode, c.what, c.got, c.want)
		}
	}
}
