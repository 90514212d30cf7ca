package mcp

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Rules decide which tools of the server the client may see and call.
//
// A tool is visible when it matches at least one Allow pattern (or Allow is
// empty) and no Deny pattern. Deny wins over Allow. The zero value shows
// every tool: the relay then only records calls.
//
// A pattern is a glob over the whole tool name: '*' matches any run of
// characters (including none, and including '/' and '.'), '?' matches
// exactly one character, and every other character matches itself, case
// sensitively. There are no character classes and no escapes, so a pattern
// always means what it looks like.
type Rules struct {
	Allow []string
	Deny  []string
}

// Validate refuses empty patterns and patterns holding a NUL byte or a
// newline, which no tool name can match on purpose.
func (r Rules) Validate() error {
	for _, l := range []struct {
		flag string
		pats []string
	}{{"allow-tool", r.Allow}, {"deny-tool", r.Deny}} {
		for _, p := range l.pats {
			switch {
			case p == "":
				return fmt.Errorf("mcp: --%s: empty pattern; fix: name a tool or a glob such as 'read_*'", l.flag)
			case strings.ContainsAny(p, "\x00\n\r"):
				return fmt.Errorf("mcp: --%s %q: holds a control character; fix: remove it", l.flag, p)
			}
		}
	}
	return nil
}

// Check says whether tool is visible and, when it is not, which rule hid
// it, in the words of the command line ("--deny-tool 'write_*'").
func (r Rules) Check(tool string) (ok bool, rule string) {
	for _, p := range r.Deny {
		if Match(p, tool) {
			return false, fmt.Sprintf("--deny-tool %q", p)
		}
	}
	if len(r.Allow) == 0 {
		return true, ""
	}
	for _, p := range r.Allow {
		if Match(p, tool) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("no --allow-tool pattern (%s)", strings.Join(quoteAll(r.Allow), ", "))
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// Match reports whether name matches the glob pattern (see Rules). It runs
// in O(len(pattern)·len(name)) time whatever the input.
func Match(pattern, name string) bool {
	// Iterative matcher with one backtrack point: the last '*' seen.
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == name[n]) && pattern[p] != '*':
			if pattern[p] == '?' {
				// '?' is one character, not one byte.
				_, size := utf8.DecodeRuneInString(name[n:])
				n += size
			} else {
				n++
			}
			p++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case star >= 0:
			_, size := utf8.DecodeRuneInString(name[mark:])
			mark += size
			p, n = star+1, mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
