package limits

import "testing"

func TestReleaseAtLeast(t *testing.T) {
	for _, c := range []struct {
		release string
		want    bool
	}{
		{"5.14.0", true}, {"5.13.19", false}, {"6.1.0-13-amd64", true}, {"4.19.0", false},
		{"5.14-rc1", true}, {"5.4.0-150-generic", false}, {"10.0", true}, {"", false}, {"x.y", false}, {"6", false},
	} {
		if got := releaseAtLeast(c.release, 5, 14); got != c.want {
			t.Errorf("releaseAtLeast(%q, 5, 14) = %v, want %v", c.release, got, c.want)
		}
	}
}
