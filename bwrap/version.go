package bwrap

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a bubblewrap release number: up to three dot-separated
// numbers, optionally followed by -PRERELEASE or +BUILD ("0.8.0",
// "0.11.0-rc1"). A prerelease sorts before its release, so a release
// candidate of a fixed version is not taken for the fix. The zero value is
// version 0.0.0.
type Version struct {
	n   [3]int
	pre bool   // a -PRERELEASE suffix
	raw string // as parsed
}

// ParseVersion reads a release number as bwrap --version prints it,
// without the "bubblewrap" word. It is plain string work, not a regular
// expression: every start of sandbox-run would pay to compile one.
func ParseVersion(s string) (Version, error) {
	v := Version{raw: s}
	core := s
	if i := strings.IndexAny(core, "-+"); i >= 0 {
		v.pre = core[i] == '-'
		core = core[:i]
	}
	parts := strings.Split(core, ".")
	if len(parts) > len(v.n) {
		return Version{}, fmt.Errorf("version %q: more than %d numbers", s, len(v.n))
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || p[0] < '0' || p[0] > '9' { // Atoi takes a sign
			return Version{}, fmt.Errorf("version %q: %q is not a number", s, p)
		}
		v.n[i] = n
	}
	return v, nil
}

// Compare returns -1, 0 or +1 as v sorts before, with or after w.
func (v Version) Compare(w Version) int {
	for i := range v.n {
		switch {
		case v.n[i] < w.n[i]:
			return -1
		case v.n[i] > w.n[i]:
			return 1
		}
	}
	switch {
	case v.pre && !w.pre:
		return -1
	case !v.pre && w.pre:
		return 1
	}
	return 0
}

// LessThan reports whether v sorts before w.
func (v Version) LessThan(w Version) bool { return v.Compare(w) < 0 }

// String returns the version as it was parsed.
func (v Version) String() string {
	if v.raw == "" {
		return fmt.Sprintf("%d.%d.%d", v.n[0], v.n[1], v.n[2])
	}
	return v.raw
}
