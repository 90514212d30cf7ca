package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ParseSize reads a byte count the one way sandbox-run spells sizes, in
// flags and profiles alike: a whole number of bytes, optionally followed by
// a binary unit, case-insensitive:
//
//	B                  bytes
//	K, Ki, KiB         1024 bytes
//	M, Mi, MiB         1024² bytes
//	G, Gi, GiB         1024³ bytes
//	T, Ti, TiB         1024⁴ bytes
//
// "KB", "MB", "GB" and "TB" are refused: half the world reads them as
// powers of 1000 and half as powers of 1024, and a limit must mean one
// thing. So are fractions, signs, spaces and values over 2^62.
func ParseSize(s string) (int64, error) {
	n, err := parseSize(s)
	if err != nil {
		return 0, fmt.Errorf("policy: %w", err)
	}
	return n, nil
}

// ParseMemory reads a memory ceiling as --memory and a profile's "memory"
// string both spell it: "none" is NoMemoryLimit (no ceiling at all), any
// other value a size in ParseSize's spelling. "0" is refused: it would
// read as no ceiling to some and as the default ceiling to others. It is
// the one reader of that spelling.
func ParseMemory(s string) (int64, error) {
	n, err := parseMemory(s)
	if err != nil {
		return 0, fmt.Errorf("policy: %w", err)
	}
	return n, nil
}

func parseMemory(s string) (int64, error) {
	if s == "none" {
		return NoMemoryLimit, nil
	}
	n, err := parseSize(s)
	if err == nil && n == 0 {
		return 0, fmt.Errorf("size %q: ambiguous (no ceiling, or the default?); write none for no memory ceiling, or a size such as 512M", s)
	}
	return n, err
}

// parseSize is ParseSize with an error that does not name the package,
// for a caller that names the field instead (a profile's).
func parseSize(s string) (int64, error) {
	digits := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := s[len(digits):]
	bad := func(why string) (int64, error) {
		return 0, fmt.Errorf("size %q: %s; write a whole number of bytes with an optional unit K, M, G or T (KiB, MiB, GiB, TiB: powers of 1024), such as 512M", s, why)
	}
	if digits == "" || strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return bad("not a whole number")
	}
	shift := 0
	switch strings.ToUpper(unit) {
	case "", "B":
	case "K", "KI", "KIB":
		shift = 10
	case "M", "MI", "MIB":
		shift = 20
	case "G", "GI", "GIB":
		shift = 30
	case "T", "TI", "TIB":
		shift = 40
	case "KB", "MB", "GB", "TB":
		return bad(fmt.Sprintf("%s is ambiguous (1000 or 1024?)", unit))
	default:
		return bad(fmt.Sprintf("unknown unit %q", unit))
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v > (1<<62)>>shift {
		return bad("too large")
	}
	return v << shift, nil
}

// ParseDuration reads a duration the one way sandbox-run spells them, in
// flags and profiles alike: Go's syntax ("90s", "1m30s", "500ms", "2h").
// A bare number without a unit is refused, except "0".
func ParseDuration(s string) (time.Duration, error) {
	d, err := parseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("policy: %w", err)
	}
	return d, nil
}

// parseDuration is ParseDuration with an error that does not name the
// package, for a caller that names the field instead.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want a number with a unit, such as 90s, 10m or 1h30m", s)
	}
	return d, nil
}

// sizeFields are the profile fields that hold a size: a JSON number of
// bytes, or a string in ParseSize's spelling ("512M"), the same as the
// flags take; "memory" also takes "none" (NoMemoryLimit).
var sizeFields = []string{"memory", "fsize", "tmp_size", "shm_size"}

// profileSizes rewrites the size fields of a profile that are given as
// strings into numbers of bytes, so that "memory": "512M" means what
// --memory 512M means. b is one JSON object (uniqueKeys has checked).
func profileSizes(b []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return b, nil // Decode reports it
	}
	changed := false
	for _, f := range sizeFields {
		raw, ok := m[f]
		if !ok || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte(`"`)) {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("field %q: %w", f, err)
		}
		n, err := parseSize(s)
		if f == "memory" {
			n, err = parseMemory(s)
		}
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f, err)
		}
		m[f] = json.RawMessage(strconv.FormatInt(n, 10))
		changed = true
	}
	if !changed {
		return b, nil
	}
	return json.Marshal(m)
}

func sortStrings(s []string) { sort.Strings(s) }
