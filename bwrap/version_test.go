package bwrap

import "testing"

func TestParseVersion(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want [3]int
		pre  bool
		bad  bool
	}{
		{in: "0.8.0", want: [3]int{0, 8, 0}},
		{in: "0.11.1", want: [3]int{0, 11, 1}},
		{in: "1", want: [3]int{1, 0, 0}},
		{in: "0.12.0-rc1", want: [3]int{0, 12, 0}, pre: true},
		{in: "0.12.0+debian", want: [3]int{0, 12, 0}},
		{in: "", bad: true},
		{in: "0..1", bad: true},
		{in: "0.8.0.1", bad: true},
		{in: "0.x", bad: true},
		{in: "-1.0", bad: true},
		{in: "0.+1", bad: true},
	} {
		v, err := ParseVersion(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("ParseVersion(%q) = %v, want an error", tt.in, v)
			}
			continue
		}
		if err != nil || v.n != tt.want || v.pre != tt.pre || v.String() != tt.in {
			t.Errorf("ParseVersion(%q) = %+v, %v; want %v pre %v", tt.in, v, err, tt.want, tt.pre)
		}
	}
}

func TestVersionOrder(t *testing.T) {
	// Each version sorts strictly before the next.
	order := []string{"0.4.0", "0.6.1", "0.8.0", "0.10", "0.11.0", "0.12.0-rc1", "0.12.0", "0.12.1", "1.0.0"}
	for i := range order {
		for j := range order {
			a, _ := ParseVersion(order[i])
			b, _ := ParseVersion(order[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
	if v, _ := ParseVersion("0.12.0+build"); v.Compare(Version{n: [3]int{0, 12, 0}}) != 0 {
		t.Error("a +BUILD suffix changed the order")
	}
}
