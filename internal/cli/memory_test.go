package cli

import (
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/policy"
)

// TestMemoryFlag: --memory none turns the default ceiling off, a size
// sets it, 0 is refused as ambiguous with the fix naming none; a profile
// takes "none" the same way.
func TestMemoryFlag(t *testing.T) {
	dir := t.TempDir()
	getwd := func() (string, error) { return dir, nil }
	for _, c := range []struct {
		val     string
		want    int64
		refused string
	}{
		{"none", policy.NoMemoryLimit, ""},
		{"512M", 512 << 20, ""},
		{"0", 0, "--memory none"},
		{"-1", 0, "--memory"},
		{"None", 0, "--memory"},
	} {
		f := newRunFlags()
		if err := f.fs.Parse([]string{"--memory", c.val}); err != nil {
			t.Fatal(err)
		}
		p, err := f.policy(getwd)
		switch {
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("--memory %s: %v, want refused naming %q", c.val, err, c.refused)
		case c.refused == "" && (err != nil || p.Memory != c.want):
			t.Errorf("--memory %s: %d, %v, want %d", c.val, p.Memory, err, c.want)
		}
	}
	p, err := policy.Parse(strings.NewReader(`{"workdir":"/w","memory":"none"}`))
	if err != nil || p.Memory != policy.NoMemoryLimit || p.Validate() != nil {
		t.Errorf(`profile "memory": "none": %d, %v`, p.Memory, err)
	}
	if err := (policy.Policy{Workdir: "/w", Memory: -2}).Validate(); err == nil {
		t.Error("memory -2 validated; only NoMemoryLimit (-1) is a negative value")
	}
}
