package filter

import (
	"slices"
	"strings"
	"testing"
)

// TestNumbersLookup: every generated table is sorted by name with no name
// twice, which the binary search needs, and finds each of its entries and
// nothing else.
func TestNumbersLookup(t *testing.T) {
	tables := map[string]numbers{
		"sysnumX86_64": sysnumX86_64, "sysnumAArch64": sysnumAArch64,
		"constX86_64": constX86_64, "constAArch64": constAArch64,
	}
	for name, tab := range tables {
		if len(tab) == 0 {
			t.Errorf("%s: empty", name)
		}
		if !slices.IsSortedFunc(tab, func(a, b number) int { return strings.Compare(a.name, b.name) }) {
			t.Errorf("%s: not sorted by name", name)
		}
		for i, n := range tab {
			if i > 0 && tab[i-1].name == n.name {
				t.Errorf("%s: %s twice", name, n.name)
			}
			if v, ok := tab.lookup(n.name); !ok || v != n.v {
				t.Errorf("%s: lookup(%q) = %d, %v; want %d", name, n.name, v, ok, n.v)
			}
			// A name just past this one, and one just before it, are
			// not in the table unless they are its neighbours.
			for _, near := range []string{n.name + "\x00", n.name[:len(n.name)-1]} {
				if _, ok := tab.lookup(near); ok && !slices.ContainsFunc(tab, func(m number) bool { return m.name == near }) {
					t.Errorf("%s: lookup(%q) found a name the table lacks", name, near)
				}
			}
		}
		for _, absent := range []string{"", "no_such_call", "zzz", "READ"} {
			if v, ok := tab.lookup(absent); ok {
				t.Errorf("%s: lookup(%q) = %d, want absent", name, absent, v)
			}
		}
	}
	// Spot checks against the kernel's own numbers.
	for _, c := range []struct {
		tab  numbers
		name string
		want uint32
	}{
		{sysnumX86_64, "read", 0}, {sysnumX86_64, "ptrace", 101}, {sysnumX86_64, "_sysctl", 156},
		{sysnumAArch64, "ptrace", 117}, {sysnumAArch64, "io_setup", 0},
	} {
		if v, ok := c.tab.lookup(c.name); !ok || v != c.want {
			t.Errorf("lookup(%q) = %d, %v; want %d", c.name, v, ok, c.want)
		}
	}
}
