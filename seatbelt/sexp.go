package seatbelt

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrUnsafeString marks a string that Render refuses to put into a profile
// because it cannot be written as an SBPL string literal whose reading is
// known: it holds a control character, is not valid UTF-8, or is longer
// than MaxStringLen.
var ErrUnsafeString = errors.New("seatbelt: string cannot be written safely into a profile")

// MaxStringLen is the longest string Render writes into a profile: macOS's
// PATH_MAX. A longer path cannot be opened on macOS anyway.
const MaxStringLen = 1024

// UnsafeStringError names the policy field whose value was refused, and why.
type UnsafeStringError struct {
	Field  string
	Value  string
	Reason string
}

func (e *UnsafeStringError) Error() string {
	v := e.Value
	if len(v) > 80 {
		v = v[:80] + "..."
	}
	return fmt.Sprintf("seatbelt: %s %q: %s", e.Field, v, e.Reason)
}

// Unwrap returns ErrUnsafeString.
func (e *UnsafeStringError) Unwrap() error { return ErrUnsafeString }

// checkString says why s cannot be an SBPL string literal, or "" when it can.
//
// SBPL is read by the TinyScheme reader inside libsandbox. Inside a string
// literal that reader gives meaning to exactly two bytes, the backslash and
// the double quote, and to the end of input; quote escapes the first two.
// Everything that is refused here is refused because its reading was not
// verified on a Mac, not because it is known to be harmful:
//
//   - control bytes (0x00-0x1f, 0x7f): a newline or NUL inside a literal;
//   - invalid UTF-8: in particular 0xff, which a reader that stores input in
//     a signed char sees as -1, the EOF value, ending the string early;
//     valid UTF-8 never holds 0xfe or 0xff;
//   - more than MaxStringLen bytes.
func checkString(s string) string {
	if len(s) > MaxStringLen {
		return fmt.Sprintf("longer than %d bytes", MaxStringLen)
	}
	return checkChars(s)
}

// maxLiteralLen bounds every literal quote writes. Render's own strings
// are longer than the paths they are made from (a regex escapes a path and
// adds a fixed suffix), so the limit is wider than MaxStringLen, which
// bounds what comes from the policy.
const maxLiteralLen = 8 * MaxStringLen

// checkChars is checkString without the length limit.
func checkChars(s string) string {
	if !utf8.ValidString(s) {
		return "not valid UTF-8"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return fmt.Sprintf("holds the control byte 0x%02x", c)
		}
	}
	return ""
}

// quote writes s as an SBPL string literal. The caller has checked s with
// checkString; quote panics on a string it would refuse, because that is a
// bug in this package, never the user's input reaching it unchecked.
func quote(s string) string {
	why := checkChars(s)
	if why == "" && len(s) > maxLiteralLen {
		why = fmt.Sprintf("longer than %d bytes", maxLiteralLen)
	}
	if why != "" {
		panic("BUG(sandbox-run): seatbelt: unchecked string reached quote: " + why)
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// node is one SBPL expression: a list, a symbol or a string. Rendered
// profiles are built as nodes and only then written out, so that a string
// can only ever become a string literal, whatever it holds.
type node struct {
	list []node
	sym  string // a symbol from this package's own constants
	str  *string
}

func sym(s string) node { return node{sym: s} }

func str(s string) node { return node{str: &s} }

func list(n ...node) node {
	if n == nil {
		n = []node{}
	}
	return node{list: n}
}

func (n node) isList() bool { return n.list != nil }

// validSymbol reports whether s is a symbol this package may write: the
// operation, filter and modifier names of SBPL, which are lower-case words
// joined by '-', an optional trailing '*', and the upper-case constants of
// vnode-type and socket-domain.
func validSymbol(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		case c == '*' && i == len(s)-1:
		default:
			return false
		}
	}
	return true
}

// write appends the text of n to b. Lists are written on one line.
func (n node) write(b *strings.Builder) {
	switch {
	case n.str != nil:
		b.WriteString(quote(*n.str))
	case n.isList():
		b.WriteByte('(')
		for i, c := range n.list {
			if i > 0 {
				b.WriteByte(' ')
			}
			c.write(b)
		}
		b.WriteByte(')')
	default:
		if !validSymbol(n.sym) {
			panic("BUG(sandbox-run): seatbelt: invalid symbol " + fmt.Sprintf("%q", n.sym))
		}
		b.WriteString(n.sym)
	}
}

func (n node) String() string {
	var b strings.Builder
	n.write(&b)
	return b.String()
}
