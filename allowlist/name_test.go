package allowlist

import (
	"net/netip"
	"testing"
)

func TestMatchName(t *testing.T) {
	a, err := Parse([]string{"git.test:22", "web.test", "*.wild.test:*", "10.0.0.8", "10.2.0.0/16", "[fd00::9]:5432"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want string
		ok   bool
	}{
		{"git.test", "git.test:22", true},
		{"web.test", "web.test", true},
		{"a.wild.test", "*.wild.test:*", true},
		{"wild.test", "", false},
		{"other.test", "", false},
		{"10.0.0.8", "", false}, // an address entry is not a name
	} {
		got, ok := a.MatchName(c.name)
		if got != c.want || ok != c.ok {
			t.Errorf("MatchName(%s) = %q %v, want %q %v", c.name, got, ok, c.want, c.ok)
		}
	}
	for _, c := range []struct {
		ip   string
		want bool
	}{
		{"10.0.0.8", true}, {"10.2.3.4", true}, {"fd00::9", true}, {"10.0.0.9", false}, {"93.184.216.34", false},
	} {
		if got := a.NamesAddr(netip.MustParseAddr(c.ip)); got != c.want {
			t.Errorf("NamesAddr(%s) = %v, want %v", c.ip, got, c.want)
		}
	}
}
