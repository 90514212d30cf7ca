package httprule

import (
	"strings"

	"github.com/sandbox-run/sandbox-run/allowlist"
)

// Set is the rules of a run, by host. The zero value has no rules.
type Set struct {
	rules []Rule
}

// ParseSet parses every rule; the first bad one is the error.
func ParseSet(raws []string) (Set, error) {
	var s Set
	for _, raw := range raws {
		r, err := Parse(raw)
		if err != nil {
			return Set{}, err
		}
		s.rules = append(s.rules, r)
	}
	return s, nil
}

// Rules are the set's rules, in the order given.
func (s Set) Rules() []Rule { return append([]Rule(nil), s.rules...) }

// Covers reports whether t has rules, and so whether its requests are judged.
func (s Set) Covers(t allowlist.Target) bool {
	for _, r := range s.rules {
		if r.host == t {
			return true
		}
	}
	return false
}

// Hosts are the distinct hosts the rules name, in the order first named.
func (s Set) Hosts() []allowlist.Target {
	var out []allowlist.Target
	for _, r := range s.rules {
		seen := false
		for _, h := range out {
			seen = seen || h == r.host
		}
		if !seen {
			out = append(out, r.host)
		}
	}
	return out
}

// Judge returns the first rule that allows method on the canonical path p
// of t, and whether there is one.
func (s Set) Judge(method string, t allowlist.Target, p string) (Rule, bool) {
	for _, r := range s.rules {
		if r.Match(method, t, p) {
			return r, true
		}
	}
	return Rule{}, false
}

// Suggest is a rule that would allow method on the canonical path p of t,
// written as the flag that adds it.
func Suggest(method string, t allowlist.Target, p string) string {
	host := t.Host()
	if t.Port() != DefaultPort {
		host = t.String()
	}
	return "--allow-http " + shellQuote(method+" "+host+p)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// AllowEntry is the allow-list entry a rule's host implies: the exact host
// (or address) and port.
func AllowEntry(t allowlist.Target) string { return t.String() }
