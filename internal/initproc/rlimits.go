package initproc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/limits"
)

// The rlimits' wire format is init's own: the launcher hands init and the
// exec shim typed limits (Config.Rlimits, ExecArgs) and only this file
// reads or writes the text on their command lines.

// encodeRlimits returns the compact form of rs for init's and the exec
// shim's argv:
// comma-separated name=soft or name=soft:hard (when they differ), numbers
// in decimal, "inf" for limits.Infinity, e.g. "core=0,nofile=64,cpu=2:3". An empty
// list encodes as "".
func encodeRlimits(rs []limits.Rlimit) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(r.Resource))
		b.WriteByte('=')
		b.WriteString(encodeValue(r.Soft))
		if r.Hard != r.Soft {
			b.WriteByte(':')
			b.WriteString(encodeValue(r.Hard))
		}
	}
	return b.String()
}

func encodeValue(v uint64) string {
	if v == limits.Infinity {
		return "inf"
	}
	return strconv.FormatUint(v, 10)
}

// parseRlimits is the inverse of encodeRlimits. It refuses, with an error
// wrapping ErrUsage, an unknown resource, a repeated one, a soft limit
// above the hard one, and anything but plain decimal digits or "inf":
// parseRlimits(encodeRlimits(rs)) returns rs for every valid rs, and
// whatever parses is written only one way.
func parseRlimits(s string) ([]limits.Rlimit, error) {
	if s == "" {
		return nil, nil
	}
	bad := func(item, why string) error {
		return fmt.Errorf("%w: rlimit %q: %s", ErrUsage, item, why)
	}
	var out []limits.Rlimit
	seen := map[limits.Resource]bool{}
	for _, item := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(item, "=")
		if !ok {
			return nil, bad(item, "want name=value")
		}
		r := limits.Resource(name)
		known := false
		for _, k := range limits.Resources() {
			known = known || k == r
		}
		if !known {
			return nil, bad(item, "unknown resource")
		}
		if seen[r] {
			return nil, bad(item, "repeated")
		}
		seen[r] = true
		softS, hardS, pair := strings.Cut(val, ":")
		soft, err := parseValue(softS)
		if err != nil {
			return nil, bad(item, err.Error())
		}
		hard := soft
		if pair {
			if hard, err = parseValue(hardS); err != nil {
				return nil, bad(item, err.Error())
			}
			if hard == soft {
				return nil, bad(item, "soft:hard written for equal values")
			}
		}
		if soft > hard {
			return nil, bad(item, "soft above hard")
		}
		out = append(out, limits.Rlimit{Resource: r, Soft: soft, Hard: hard})
	}
	return out, nil
}

func parseValue(s string) (uint64, error) {
	if s == "inf" {
		return limits.Infinity, nil
	}
	if s == "" || len(s) > 20 {
		return 0, errors.New("want decimal digits or inf")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("want decimal digits or inf")
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, errors.New("leading zero")
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errors.New("out of range")
	}
	if v == limits.Infinity {
		return 0, errors.New("write infinity as inf")
	}
	return v, nil
}
