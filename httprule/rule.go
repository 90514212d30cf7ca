package httprule

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sandbox-run/sandbox-run/allowlist"
)

// ErrInvalidRule is wrapped by every error Parse returns.
var ErrInvalidRule = errors.New("invalid --allow-http rule")

// DefaultPort is the port of a rule that names none.
const DefaultPort = 443

// Rule is one parsed --allow-http rule.
type Rule struct {
	raw     string
	methods []string // nil means any method
	host    allowlist.Target
	glob    []string // path segments of the glob
}

// String is the rule as written (trimmed).
func (r Rule) String() string { return r.raw }

// Host is the rule's host and port, as allowlist reads a client target.
func (r Rule) Host() allowlist.Target { return r.host }

// Parse reads one rule. The error wraps ErrInvalidRule and says what is
// wrong.
func Parse(raw string) (Rule, error) {
	s := strings.TrimSpace(raw)
	bad := func(why string) (Rule, error) {
		return Rule{}, fmt.Errorf("%w %q: %s (want 'METHODS HOST[:PORT]/PATH-GLOB', e.g. 'GET,HEAD api.github.com/repos/**')", ErrInvalidRule, s, why)
	}
	if strings.ContainsRune(s, 0) {
		return bad("contains a NUL byte")
	}
	ms, rest, ok := strings.Cut(s, " ")
	rest = strings.TrimSpace(rest)
	if !ok || rest == "" {
		return bad("no host")
	}
	if strings.ContainsAny(rest, " \t") {
		return bad("a space inside the host or path")
	}
	r := Rule{raw: s}
	if ms != "*" {
		for m := range strings.SplitSeq(ms, ",") {
			m = strings.ToUpper(m)
			if !isToken(m) {
				return bad(fmt.Sprintf("method %q is not a method name", m))
			}
			if !slices.Contains(r.methods, m) {
				r.methods = append(r.methods, m)
			}
		}
	}
	hostport, glob := rest, "/**"
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		hostport, glob = rest[:i], rest[i:]
	}
	if strings.Contains(hostport, "*") {
		return bad("a rule names one host, without wildcards")
	}
	t, err := allowlist.ParseTarget(hostport, DefaultPort)
	if err != nil {
		return bad(err.Error())
	}
	r.host = t
	segs, err := parseGlob(glob)
	if err != nil {
		return bad(err.Error())
	}
	r.glob = segs
	return r, nil
}

// parseGlob splits a path glob into segments; it must already be in the
// canonical form Normalize produces (apart from its wildcards).
func parseGlob(glob string) ([]string, error) {
	if strings.ContainsAny(glob, "%\\?#") {
		return nil, errors.New("the path glob must be written decoded, without %, \\, ? or #")
	}
	var segs []string
	for seg := range strings.SplitSeq(glob, "/") {
		switch {
		case seg == "":
			continue
		case seg == "." || seg == "..":
			return nil, errors.New("the path glob has a dot segment")
		case strings.Contains(seg, "**") && seg != "**":
			return nil, errors.New("** must be a whole segment")
		}
		segs = append(segs, seg)
	}
	return segs, nil
}

// isToken reports whether s is an HTTP token (RFC 9110), as a method is.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// Match reports whether r allows method on the canonical path p (from
// Normalize) of target t.
func (r Rule) Match(method string, t allowlist.Target, p string) bool {
	if t != r.host {
		return false
	}
	if r.methods != nil && !slices.Contains(r.methods, method) {
		return false
	}
	return matchSegs(r.glob, splitPath(p))
}

func splitPath(p string) []string {
	var segs []string
	for seg := range strings.SplitSeq(p, "/") {
		if seg != "" {
			segs = append(segs, seg)
		}
	}
	return segs
}

// matchSegs matches path segments against glob segments; "**" takes any
// number of segments. The recursion is bounded by len(glob)*len(path).
func matchSegs(glob, path []string) bool {
	for len(glob) > 0 {
		if glob[0] == "**" {
			for len(glob) > 0 && glob[0] == "**" {
				glob = glob[1:]
			}
			if len(glob) == 0 {
				return true
			}
			for i := range len(path) + 1 {
				if matchSegs(glob, path[i:]) {
					return true
				}
			}
			return false
		}
		if len(path) == 0 || !matchSeg(glob[0], path[0]) {
			return false
		}
		glob, path = glob[1:], path[1:]
	}
	return len(path) == 0
}

// matchSeg matches one segment: "*" in pat stands for any run of
// characters (a segment holds no slash).
func matchSeg(pat, s string) bool {
	parts := strings.Split(pat, "*")
	if len(parts) == 1 {
		return pat == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}
