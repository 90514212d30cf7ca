package policy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ParseSize reads a byte count such as "512", "64K", "256M" or "2G" (powers
// of 1024).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(t, "B")
	t = strings.TrimSuffix(t, "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("policy: size %q: want a number with an optional K, M, G or T suffix", s)
	}
	return v * mult, nil
}

func sortStrings(s []string) { sort.Strings(s) }
