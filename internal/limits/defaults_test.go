package limits

import (
	"testing"
)

func TestDefaultMemoryOf(t *testing.T) {
	for _, c := range []struct {
		total, want int64
	}{
		{24 << 30, 12 << 30},
		{(24 << 30) + (100 << 20), 12<<30 + 0}, // half is 12 GiB + 50 MiB: down to 64 MiB
		{(24 << 30) + (130 << 20), 12<<30 + 64<<20},
		{1 << 30, 512 << 20},
		{100 << 20, 64 << 20}, // at least 64 MiB
		{0, 64 << 20},
	} {
		if got := DefaultMemoryOf(c.total); got != c.want {
			t.Errorf("DefaultMemoryOf(%d) = %d, want %d", c.total, got, c.want)
		}
	}
}

// TestPlanDefaultMemory: the default ceiling, sampled, has no RLIMIT_DATA
// backstop (every run would need the exec shim); one asked for has it.
func TestPlanDefaultMemory(t *testing.T) {
	hasData := func(p Plan) bool {
		for _, r := range p.Rlimits {
			if r.Resource == Data {
				return true
			}
		}
		return false
	}
	l := Limits{Memory: 1 << 30}
	asked, err := NewPlan(l, Env{})
	if err != nil || !hasData(asked) || asked.How.Memory != BySampler {
		t.Fatalf("asked for: %+v, %v; want sampled with RLIMIT_DATA", asked, err)
	}
	def, err := NewPlan(l, Env{DefaultMemory: true})
	if err != nil || hasData(def) || def.How.Memory != BySampler || def.Sample.Memory != l.Memory {
		t.Fatalf("default: %+v, %v; want sampled without RLIMIT_DATA", def, err)
	}
	cg, err := NewPlan(l, Env{DefaultMemory: true, Cgroup: true, CgroupMemory: true})
	if err != nil || cg.How.Memory != ByCgroup || cg.Cgroup.Memory != l.Memory {
		t.Fatalf("default with a cgroup: %+v, %v; want memory.max", cg, err)
	}
}

func TestInotifyReadBack(t *testing.T) {
	c := Inotify{Instances: 32, Watches: 48135}
	for _, c2 := range []struct {
		out string
		ok  bool
	}{
		{"32\n48135\n", true},
		{"32\n48136\n", false},
		{"128\n48135\n", false},
		{"32\n", false},
		{"", false},
	} {
		if err := c.CheckReadBack(c2.out); (err == nil) != c2.ok {
			t.Errorf("CheckReadBack(%q) = %v, want ok %v", c2.out, err, c2.ok)
		}
	}
}
