package mcp

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Rules decide which tools, prompts and resources of the server the
// client may see and use.
//
// Each kind has its own Allow and Deny patterns, matched against a tool's
// name, a prompt's name and a resource's URI (or a resource template's URI
// template, as written). A thing is visible when it matches no Deny pattern
// of its kind and either matches an Allow pattern of its kind or its kind
// is open. Deny wins over Allow.
//
// Allow-list mode: when any Allow list is non-empty, every kind whose own
// Allow list is empty is closed: nothing of it is visible. So
// --allow-tool 'read_*' alone also hides every prompt and resource; give
// --allow-prompt '*' or --allow-resource '*' to open those again. With no
// Allow list at all, every kind is open and only Deny hides. The zero value
// shows everything: the relay then only records.
//
// A pattern is a glob over the whole name or URI: '*' matches any run of
// characters (including none, and including '/' and '.'), '?' matches
// exactly one character, and every other character matches itself, case
// sensitively. There are no character classes and no escapes: a pattern
// holding '[', ']', '{', '}' or '\\' is refused, because in other glob
// dialects those are syntax and the pattern would not mean what it looks
// like.
//
// The relay matches resource patterns against URIs in canonical form
// (CanonicalURI), with the patterns written the same way
// (CanonicalPattern); CheckKind itself matches the name as given.
type Rules struct {
	Allow []string // tools
	Deny  []string

	AllowPrompts []string
	DenyPrompts  []string

	AllowResources []string
	DenyResources  []string
}

// Kinds of things the rules judge.
const (
	KindTool     = "tool"
	KindPrompt   = "prompt"
	KindResource = "resource"
)

// lists returns the rules' pattern lists with their flag names.
func (r Rules) lists() []patternList {
	return []patternList{
		{"allow-tool", r.Allow}, {"deny-tool", r.Deny},
		{"allow-prompt", r.AllowPrompts}, {"deny-prompt", r.DenyPrompts},
		{"allow-resource", r.AllowResources}, {"deny-resource", r.DenyResources},
	}
}

type patternList struct {
	flag string
	pats []string
}

// Validate refuses empty patterns, patterns holding a control character
// (no name can match them on purpose) and patterns using syntax of other
// glob dialects ('[', ']', '{', '}', '\\'), which would match nothing the
// user meant.
func (r Rules) Validate() error {
	for _, l := range r.lists() {
		for _, p := range l.pats {
			if err := validatePattern(l.flag, p); err != nil {
				return err
			}
		}
	}
	return nil
}

func validatePattern(flag, p string) error {
	if p == "" {
		return fmt.Errorf("mcp: --%s: empty pattern; fix: name one or give a glob such as 'read_*'", flag)
	}
	for _, c := range p {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("mcp: --%s %q: holds a control character; fix: remove it", flag, p)
		}
	}
	if i := strings.IndexAny(p, "[]{}\\"); i >= 0 {
		return fmt.Errorf("mcp: --%s %q: %q is not glob syntax here (only * and ? are, and nothing is escaped), so the pattern would match nothing you meant; fix: use * or ? in its place", flag, p, p[i:i+1])
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("mcp: --%s %q: not valid UTF-8; fix: write the name as the server spells it", flag, p)
	}
	return nil
}

// allowListMode says some Allow list is set, which closes the kinds
// without one.
func (r Rules) allowListMode() bool {
	return len(r.Allow) > 0 || len(r.AllowPrompts) > 0 || len(r.AllowResources) > 0
}

// Check says whether tool is visible and, when it is not, which rule hid
// it, in the words of the command line ("--deny-tool 'write_*'").
func (r Rules) Check(tool string) (ok bool, rule string) {
	return r.CheckKind(KindTool, tool)
}

// CheckKind says whether the thing of kind (KindTool, KindPrompt,
// KindResource) named name (a URI for resources) is visible and, when it
// is not, which rule hid it. An unknown kind is never visible.
func (r Rules) CheckKind(kind, name string) (ok bool, rule string) {
	var allow, deny []string
	switch kind {
	case KindTool:
		allow, deny = r.Allow, r.Deny
	case KindPrompt:
		allow, deny = r.AllowPrompts, r.DenyPrompts
	case KindResource:
		allow, deny = r.AllowResources, r.DenyResources
	default:
		return false, "unknown kind " + kind
	}
	for _, p := range deny {
		if Match(p, name) {
			return false, fmt.Sprintf("--deny-%s %q", kind, p)
		}
	}
	if len(allow) == 0 {
		if r.allowListMode() {
			return false, fmt.Sprintf("allow-list mode: no --allow-%s pattern", kind)
		}
		return true, ""
	}
	for _, p := range allow {
		if Match(p, name) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("no --allow-%s pattern (%s)", kind, strings.Join(quoteAll(allow), ", "))
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
