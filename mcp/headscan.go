package mcp

import (
	"encoding/json"
	"strings"
)

// headScan reads the top-level "id" and "method" of a JSON object fed to
// it in pieces, keeping a few hundred bytes whatever the object's size. It
// is how the relay answers a client message too large to hold: under the
// message's own id, wherever in the object the id is (the TypeScript SDK
// writes it last, after the params).
//
// It trusts nothing: a key given twice, or spelt other than in lower case
// ("ID", which encoding/json reads as the id and JSON.parse does not), an id
// that is not a string or an integer, or an object that does not end
// cleanly leaves the id unread.
type headScan struct {
	depth   int
	started bool
	bad     bool // not an object, or broken
	inStr   bool
	esc     bool

	expectKey, expectVal bool
	inKey                bool
	key                  []byte
	inVal                bool // a top-level member's value is being captured
	valStr               bool // ... and it is a string
	val                  []byte
	cur                  string // "id", "method" or "": whose value this is
	done                 bool

	ids, methods int
	folded       bool // "ID", "Method", ...: parsers disagree on those
	id, method   []byte
}

// Bounds of what headScan keeps.
const (
	headKeyMax = 64
	headValMax = maxIDBytes + 2
)

func (h *headScan) feed(b []byte) {
	for _, c := range b {
		if h.bad || h.done {
			return
		}
		h.step(c)
	}
}

func (h *headScan) step(c byte) {
	switch {
	case h.inStr:
		h.stringByte(c)
	case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		h.endScalar()
	case c == '"':
		h.openString(c)
	case c == '{' || c == '[':
		h.open(c)
	case c == '}' || c == ']':
		h.endScalar()
		h.depth--
		h.done = h.depth == 0
	case c == ':':
		h.expectVal = h.expectVal || h.depth == 1
	case c == ',':
		if h.depth == 1 {
			h.endScalar()
			h.expectKey = true
		}
	case !h.started:
		h.bad = true
	case h.depth == 1 && h.expectVal:
		h.startVal(c, false)
	default:
		h.keep(c)
	}
}

// stringByte takes a byte inside a string.
func (h *headScan) stringByte(c byte) {
	h.keep(c)
	switch {
	case h.esc:
		h.esc = false
	case c == '\\':
		h.esc = true
	case c == '"':
		h.inStr = false
		h.endString()
	}
}

// openString starts a string: a top-level key, a top-level value or
// anything deeper.
func (h *headScan) openString(c byte) {
	h.inStr = true
	switch {
	case h.depth == 1 && h.expectKey:
		h.inKey, h.expectKey, h.key = true, false, []byte{c}
	case h.depth == 1 && h.expectVal:
		h.startVal(c, true)
	}
}

// open starts an object or a list: the message itself, or a value.
func (h *headScan) open(c byte) {
	if !h.started {
		h.started = true
		h.bad = c != '{'
		h.depth, h.expectKey = 1, true
		return
	}
	if h.depth == 1 && h.expectVal {
		h.startVal(c, false)
		h.inVal = false // a compound value is never an id or a method
		h.finish()
	}
	h.depth++
}

func (h *headScan) keep(c byte) {
	switch {
	case h.inKey && len(h.key) < headKeyMax:
		h.key = append(h.key, c)
	case h.inVal && len(h.val) < headValMax:
		h.val = append(h.val, c)
	case h.inKey || h.inVal:
		h.cur = "" // too long to be what we look for
	}
}

func (h *headScan) startVal(c byte, str bool) {
	h.expectVal = false
	h.inVal, h.valStr, h.val = true, str, []byte{c}
}

func (h *headScan) endString() {
	if h.inKey {
		h.inKey = false
		var k string
		if len(h.key) < headKeyMax && json.Unmarshal(h.key, &k) == nil {
			switch {
			case strings.EqualFold(k, "id"):
				h.cur = "id"
				h.ids++
				h.folded = h.folded || k != "id"
			case strings.EqualFold(k, "method"):
				h.cur = "method"
				h.methods++
				h.folded = h.folded || k != "method"
			default:
				h.cur = ""
			}
		} else {
			h.cur = ""
		}
		return
	}
	if h.inVal && h.valStr {
		h.finish()
	}
}

func (h *headScan) endScalar() {
	if h.inVal && !h.valStr && !h.inStr {
		h.finish()
	}
}

// finish stores the value just read for the member it belongs to.
func (h *headScan) finish() {
	if h.inVal && len(h.val) < headValMax {
		switch h.cur {
		case "id":
			h.id = h.val
		case "method":
			h.method = h.val
		}
	}
	h.inVal, h.cur = false, ""
}

// result returns the object's id (nil when it has none) and method, and
// whether they could be read without doubt.
func (h *headScan) result() (id json.RawMessage, method string, ok bool) {
	if h.bad || !h.done || h.ids > 1 || h.methods > 1 || h.folded {
		return nil, "", false
	}
	if h.methods == 1 && (h.method == nil || json.Unmarshal(h.method, &method) != nil) {
		return nil, "", false
	}
	if h.ids == 0 {
		return nil, method, method != ""
	}
	if _, err := idKey(h.id); err != nil {
		return nil, "", false
	}
	return json.RawMessage(h.id), method, true
}
