package policy

import (
	"strings"
	"testing"
)

// TestParseMemory: "none" and sizes read the same from a flag and a
// profile; "0" is refused in both.
func TestParseMemory(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{{"none", NoMemoryLimit, true}, {"512M", 512 << 20, true}, {"1", 1, true}, {"0", 0, false}, {"-1", 0, false}, {"None", 0, false}} {
		n, err := ParseMemory(tc.in)
		if (err == nil) != tc.ok || n != tc.want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d, ok %v", tc.in, n, err, tc.want, tc.ok)
		}
		if !tc.ok {
			continue
		}
		p, err := Parse(strings.NewReader(`{"workdir": "/w", "memory": "` + tc.in + `"}`))
		if err != nil || p.Memory != tc.want {
			t.Errorf("profile memory %q = %d, %v; want %d", tc.in, p.Memory, err, tc.want)
		}
	}
	if _, err := Parse(strings.NewReader(`{"workdir": "/w", "memory": "0"}`)); err == nil {
		t.Error(`profile "memory": "0" accepted; want refused as --memory 0 is`)
	}
}
