package wrap

import (
	"encoding/json"
	"errors"
	"fmt"
)

// node is one value of a JSON text (with the comments and trailing commas
// VS Code's and Gemini CLI's files allow): where it lies, so that an edit
// replaces exactly its bytes and nothing around it.
type node struct {
	kind       byte // '{', '[', '"', '0' (number) or 'l' (true, false, null)
	start, end int  // the value's bytes: b[start:end]
	str        string
	members    []member // objects, in file order
	elems      []*node  // arrays
}

type member struct {
	key      string
	keyStart int
	val      *node
}

// get returns the member named key, nil when there is none.
func (n *node) get(key string) *node {
	if n == nil || n.kind != '{' {
		return nil
	}
	for _, m := range n.members {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// maxDepth bounds nesting: a hostile file must not exhaust the stack.
const maxDepth = 512

type jsoncParser struct {
	b     []byte
	i     int
	depth int
}

// parseJSONC parses b, a JSON text that may hold // and /* */ comments and
// trailing commas. Duplicate member names are refused: which one a client
// uses is its parser's choice, and wrap must not guess.
func parseJSONC(b []byte) (*node, error) {
	p := &jsoncParser{b: b}
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		p.i = 3
	}
	n, err := p.value()
	if err != nil {
		return nil, err
	}
	if err := p.space(); err != nil {
		return nil, err
	}
	if p.i != len(b) {
		return nil, p.errf("data after the top-level value")
	}
	return n, nil
}

func (p *jsoncParser) errf(format string, a ...any) error {
	line := 1
	for _, c := range p.b[:min(p.i, len(p.b))] {
		if c == '\n' {
			line++
		}
	}
	return fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, a...))
}

// space skips white space and comments.
func (p *jsoncParser) space() error {
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.i++
		case c == '/' && p.i+1 < len(p.b) && p.b[p.i+1] == '/':
			for p.i < len(p.b) && p.b[p.i] != '\n' {
				p.i++
			}
		case c == '/' && p.i+1 < len(p.b) && p.b[p.i+1] == '*':
			end := indexFrom(p.b, p.i+2, "*/")
			if end < 0 {
				return p.errf("unterminated /* comment")
			}
			p.i = end + 2
		default:
			return nil
		}
	}
	return nil
}

func indexFrom(b []byte, from int, s string) int {
	for j := from; j+len(s) <= len(b); j++ {
		if string(b[j:j+len(s)]) == s {
			return j
		}
	}
	return -1
}

func (p *jsoncParser) value() (*node, error) {
	if err := p.space(); err != nil {
		return nil, err
	}
	if p.i >= len(p.b) {
		return nil, p.errf("unexpected end of the file")
	}
	switch c := p.b[p.i]; {
	case c == '{' || c == '[':
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > maxDepth {
			return nil, p.errf("nested deeper than %d", maxDepth)
		}
		if c == '{' {
			return p.object()
		}
		return p.array()
	case c == '"':
		return p.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if indexFrom(p.b[:min(len(p.b), p.i+len(lit))], p.i, lit) == p.i {
			n := &node{kind: 'l', start: p.i, end: p.i + len(lit), str: lit}
			p.i += len(lit)
			return n, nil
		}
	}
	return nil, p.errf("unexpected %q", p.b[p.i])
}

func (p *jsoncParser) string() (*node, error) {
	start := p.i
	for j := p.i + 1; j < len(p.b); j++ {
		switch p.b[j] {
		case '\\':
			j++
		case '\n':
			return nil, p.errf("newline in a string")
		case '"':
			var s string
			if err := json.Unmarshal(p.b[start:j+1], &s); err != nil {
				return nil, p.errf("bad string: %v", err)
			}
			p.i = j + 1
			return &node{kind: '"', start: start, end: j + 1, str: s}, nil
		}
	}
	return nil, p.errf("unterminated string")
}

func (p *jsoncParser) number() (*node, error) {
	start := p.i
	for p.i < len(p.b) && isNumberByte(p.b[p.i]) {
		p.i++
	}
	var f json.Number
	if err := json.Unmarshal(p.b[start:p.i], &f); err != nil {
		return nil, p.errf("bad number %q", p.b[start:p.i])
	}
	return &node{kind: '0', start: start, end: p.i, str: string(p.b[start:p.i])}, nil
}

func isNumberByte(c byte) bool {
	return c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' || (c >= '0' && c <= '9')
}

// list parses the members or elements between open and close, calling one
// for each; a trailing comma is allowed.
func (p *jsoncParser) list(close byte, one func() error) (end int, err error) {
	p.i++ // the opening bracket
	for first := true; ; first = false {
		if err := p.space(); err != nil {
			return 0, err
		}
		if p.i < len(p.b) && p.b[p.i] == close {
			p.i++
			return p.i, nil
		}
		if !first {
			if p.i >= len(p.b) || p.b[p.i] != ',' {
				return 0, p.errf("expected ',' or %q", close)
			}
			p.i++
			if err := p.space(); err != nil {
				return 0, err
			}
			if p.i < len(p.b) && p.b[p.i] == close {
				p.i++
				return p.i, nil
			}
		}
		if err := one(); err != nil {
			return 0, err
		}
	}
}

var errDuplicate = errors.New("duplicate member")

func (p *jsoncParser) object() (*node, error) {
	n := &node{kind: '{', start: p.i}
	seen := map[string]bool{}
	end, err := p.list('}', func() error {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return p.errf("expected a member name")
		}
		k, err := p.string()
		if err != nil {
			return err
		}
		if seen[k.str] {
			return fmt.Errorf("%w %q: %w", errDuplicate, k.str, p.errf("a name given twice"))
		}
		seen[k.str] = true
		if err := p.space(); err != nil {
			return err
		}
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return p.errf("expected ':' after %q", k.str)
		}
		p.i++
		v, err := p.value()
		if err != nil {
			return err
		}
		n.members = append(n.members, member{key: k.str, keyStart: k.start, val: v})
		return nil
	})
	n.end = end
	return n, err
}

func (p *jsoncParser) array() (*node, error) {
	n := &node{kind: '[', start: p.i}
	end, err := p.list(']', func() error {
		v, err := p.value()
		if err == nil {
			n.elems = append(n.elems, v)
		}
		return err
	})
	n.end = end
	return n, err
}

// plain is the value as encoding/json would decode it (numbers as
// json.Number): what a check compares before and after an edit.
func (n *node) plain() any {
	switch n.kind {
	case '{':
		m := make(map[string]any, len(n.members))
		for _, mb := range n.members {
			m[mb.key] = mb.val.plain()
		}
		return m
	case '[':
		a := make([]any, len(n.elems))
		for i, e := range n.elems {
			a[i] = e.plain()
		}
		return a
	case '0':
		return json.Number(n.str)
	case 'l':
		switch n.str {
		case "true":
			return true
		case "false":
			return false
		}
		return nil
	}
	return n.str
}
