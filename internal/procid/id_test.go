package procid

import (
	"errors"
	"testing"
)

// TestParse: names as run directories and journals carry them, the
// legacy form without a namespace token, and what is no name.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ID
		ok   bool
	}{
		{"2.1267373.effffffc", ID{2, 1267373, "effffffc"}, true},
		{"4194304.18446744073709551615.f000025d", ID{4194304, 1<<64 - 1, "f000025d"}, true},
		{"7.0.effffffctf0000261", ID{7, 0, "effffffctf0000261"}, true}, // in a time namespace
		{"2.1267373", ID{2, 1267373, ""}, true},                        // legacy
		{"", ID{}, false},
		{"2", ID{}, false},
		{"2.", ID{}, false},
		{".5", ID{}, false},
		{"2.5.", ID{}, false},         // an empty token
		{"2.5.EFFFFFFC", ID{}, false}, // upper case: not Token's
		{"2.5.effffffc.1", ID{}, false},
		{"0.5.effffffc", ID{}, false},
		{"-2.5.effffffc", ID{}, false},
		{"+2.5.effffffc", ID{}, false},
		{"2.-5.effffffc", ID{}, false},
		{"2.18446744073709551616.effffffc", ID{}, false}, // start overflows
		{"2.5.zz", ID{}, false},
		{"2.5.effffffc-x", ID{}, false}, // the -RANDOM is cut before
		{"2.5.effffffc/x", ID{}, false},
		{"2.5.0123456789abcdef0123456789abcdef0", ID{}, false}, // too long a token
	} {
		got, err := Parse(tc.in)
		var pe *ParseError
		if tc.ok != (err == nil) || (err != nil && !errors.As(err, &pe)) || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("Parse(%q).String() = %q", tc.in, got.String())
		}
	}
}
