package seatbelt

import (
	"fmt"
	"strings"
)

// rnode is an expression as a reader with TinyScheme's rules reads it back
// from profile text. It is the test oracle: whatever a policy holds, the
// text Render writes must read back as exactly the nodes render built.
type rnode struct {
	list   []rnode
	isList bool
	sym    string
	str    *string
}

func (n rnode) String() string {
	switch {
	case n.isList:
		parts := make([]string, len(n.list))
		for i, c := range n.list {
			parts[i] = c.String()
		}
		return "(" + strings.Join(parts, " ") + ")"
	case n.str != nil:
		return fmt.Sprintf("%q", *n.str)
	}
	return n.sym
}

func equalR(a, b rnode) bool {
	if a.isList != b.isList || (a.str == nil) != (b.str == nil) {
		return false
	}
	switch {
	case a.isList:
		if len(a.list) != len(b.list) {
			return false
		}
		for i := range a.list {
			if !equalR(a.list[i], b.list[i]) {
				return false
			}
		}
		return true
	case a.str != nil:
		return *a.str == *b.str
	}
	return a.sym == b.sym
}

// toR converts what render built into the reader's form.
func toR(n node) rnode {
	switch {
	case n.str != nil:
		s := *n.str
		return rnode{str: &s}
	case n.isList():
		out := rnode{isList: true, list: []rnode{}}
		for _, c := range n.list {
			out.list = append(out.list, toR(c))
		}
		return out
	}
	return rnode{sym: n.sym}
}

// readSBPL reads every top-level expression of text the way TinyScheme's
// reader does for the subset of syntax SBPL profiles use: lists, symbols,
// string literals with backslash escapes, and ';' comments. Syntax that
// Render never writes (regex literals #"...", quote characters, octal or
// hex escapes) is an error, so that a path that smuggled it in is caught
// as a failure rather than read some other way.
func readSBPL(text string) ([]rnode, error) {
	r := &reader{s: text}
	var out []rnode
	for {
		r.skip()
		if r.i >= len(r.s) {
			return out, nil
		}
		n, err := r.expr()
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
}

type reader struct {
	s string
	i int
}

func (r *reader) skip() {
	for r.i < len(r.s) {
		switch c := r.s[r.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			r.i++
		case c == ';':
			for r.i < len(r.s) && r.s[r.i] != '\n' {
				r.i++
			}
		default:
			return
		}
	}
}

func (r *reader) expr() (rnode, error) {
	r.skip()
	if r.i >= len(r.s) {
		return rnode{}, fmt.Errorf("unexpected end of input")
	}
	switch c := r.s[r.i]; c {
	case '(':
		r.i++
		n := rnode{isList: true, list: []rnode{}}
		for {
			r.skip()
			if r.i >= len(r.s) {
				return rnode{}, fmt.Errorf("unterminated list")
			}
			if r.s[r.i] == ')' {
				r.i++
				return n, nil
			}
			c, err := r.expr()
			if err != nil {
				return rnode{}, err
			}
			n.list = append(n.list, c)
		}
	case ')':
		return rnode{}, fmt.Errorf("unexpected ) at %d", r.i)
	case '"':
		r.i++
		var b strings.Builder
		for {
			if r.i >= len(r.s) {
				return rnode{}, fmt.Errorf("unterminated string")
			}
			c := r.s[r.i]
			r.i++
			switch c {
			case '"':
				s := b.String()
				return rnode{str: &s}, nil
			case '\\':
				if r.i >= len(r.s) {
					return rnode{}, fmt.Errorf("unterminated escape")
				}
				e := r.s[r.i]
				r.i++
				switch {
				case e == 'n':
					b.WriteByte('\n')
				case e == 't':
					b.WriteByte('\t')
				case e == 'r':
					b.WriteByte('\r')
				case e == 'x' || e == 'X' || (e >= '0' && e <= '7'):
					return rnode{}, fmt.Errorf("numeric escape \\%c at %d", e, r.i-1)
				default:
					b.WriteByte(e)
				}
			default:
				if c < 0x20 || c == 0x7f {
					return rnode{}, fmt.Errorf("raw control byte 0x%02x in a string at %d", c, r.i-1)
				}
				b.WriteByte(c)
			}
		}
	case '\'', '`', ',', '#':
		return rnode{}, fmt.Errorf("syntax %q that profiles never use at %d", c, r.i)
	}
	start := r.i
	for r.i < len(r.s) {
		c := r.s[r.i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '(' || c == ')' || c == '"' || c == ';' {
			break
		}
		r.i++
	}
	return rnode{sym: r.s[start:r.i]}, nil
}
