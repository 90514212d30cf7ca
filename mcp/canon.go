package mcp

// What is judged is what is forwarded. The relay never passes on the bytes
// it read: it writes its own encoding of the message it judged (outMsg),
// in one canonical form (appendCanon), and it refuses a message whose
// member names another parser could read as ones the relay reads
// (memberSet). Why both: a server's JSON library may read a message
// otherwise than the relay does. encoding/json (mcp-go, the official Go
// SDK before v1.3.1) matches member names regardless of case, so "ID" is
// the id and "Name" the name; the Go SDK from v1.3.1 (segmentio/encoding)
// drops trailing NULs from a key, so "name\u0000" is the name. Whatever the
// relay judges as absent, such a parser reads as present. And a parser
// that decodes strings or escapes otherwise (invalid UTF-8, lone
// surrogates, whitespace it does not expect) could end a string elsewhere
// and find members the relay never saw: re-encoding leaves it nothing but
// plain JSON the relay wrote itself.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// errNearMiss marks a member whose name is not one the relay reads but
// which a lenient parser would read as one (see memberSet).
var errNearMiss = errors.New("a member name differs from a protocol member only in case or control characters")

// nearMissError names the member and the one it could be read as. Names
// are quoted with %q, so control characters show as escapes.
type nearMissError struct{ got, want string }

func (e *nearMissError) Error() string {
	return fmt.Sprintf("member %s differs from %q only in case or control characters; member names are exact",
		capString(fmt.Sprintf("%q", e.got)), e.want)
}

func (e *nearMissError) Is(target error) bool { return target == errNearMiss }

// memberSet is the member names the relay reads at one level of a
// message. A member named otherwise but equal to one of them once folded
// (see fold) is a near miss: encoding/json or segmentio/encoding would
// read it as that member.
type memberSet struct {
	names []string
	folds []string
}

func newMemberSet(names ...string) memberSet {
	s := memberSet{names: names}
	for _, n := range names {
		s.folds = append(s.folds, fold(n))
	}
	return s
}

// The levels the relay reads, both ways.
var (
	envelopeMembers = newMemberSet("jsonrpc", "id", "method", "params", "result", "error")
	// paramsMembers are read in any request's or notification's params.
	paramsMembers = newMemberSet("name", "uri", "arguments", "cursor", "_meta", "ref", "capabilities",
		"requestId", "protocolVersion")
	metaMembers = newMemberSet("progressToken", metaClientCapabilities, metaSubscriptionID)
	refMembers  = newMemberSet("type", "name", "uri")
	// listMembers are read in a list result, entryMembers in its entries.
	listMembers  = newMemberSet("tools", "prompts", "resources", "resourceTemplates", "nextCursor", "_meta")
	entryMembers = newMemberSet("name", "uri", "uriTemplate")
)

// check returns a nearMissError for the first near miss in o (by name,
// so that the error does not depend on map order), or nil.
func (s memberSet) check(o object) error {
	var miss *nearMissError
	for k := range o {
		if want, ok := s.nearMiss(k); ok && (miss == nil || k < miss.got) {
			miss = &nearMissError{got: k, want: want}
		}
	}
	if miss == nil {
		return nil
	}
	return miss
}

// nearMiss says whether k, not itself a member of s, folds to one, and
// which.
func (s memberSet) nearMiss(k string) (string, bool) {
	if slices.Contains(s.names, k) {
		return "", false
	}
	if plainASCII(k) {
		// The common case, without allocating: ASCII folds by case only.
		for _, n := range s.names {
			if strings.EqualFold(k, n) {
				return n, true
			}
		}
		return "", false
	}
	f := fold(k)
	var cut string
	if i := strings.IndexByte(k, 0); i > 0 {
		// A parser keeping C strings would stop at the NUL.
		cut = fold(k[:i])
	}
	for i, n := range s.names {
		if f == s.folds[i] || cut == s.folds[i] {
			return n, true
		}
	}
	return "", false
}

// plainASCII says k is printable ASCII without spaces.
func plainASCII(k string) bool {
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] >= 0x7f {
			return false
		}
	}
	return true
}

// fold is a name as the most lenient parser the relay knows of would
// match it: control, format and space characters left out, and every
// letter folded as encoding/json folds it (upper of lower, so the Kelvin
// sign is K and the long s is S), then to the least of its case orbit.
func fold(k string) string {
	var b strings.Builder
	for _, r := range k {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) {
			continue
		}
		r = unicode.ToUpper(unicode.ToLower(r))
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			r = min(r, f)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// emitter collects output in buf and, with a writer, passes it on in
// pieces of about emitChunk bytes, so that a large message is not copied
// whole; a long plain string is written from where it lies. Without a
// writer it collects everything.
type emitter struct {
	w   io.Writer
	buf []byte
	err error
}

const emitChunk = 64 << 10

func (em *emitter) write(b []byte) {
	if em.w == nil || len(em.buf)+len(b) < emitChunk {
		em.buf = append(em.buf, b...)
		return
	}
	em.flush()
	if len(b) < emitChunk {
		em.buf = append(em.buf, b...)
	} else if em.err == nil {
		_, em.err = em.w.Write(b)
	}
}

// flush writes what buf holds, when there is a writer.
func (em *emitter) flush() {
	if em.w == nil || len(em.buf) == 0 {
		return
	}
	if em.err == nil {
		_, em.err = em.w.Write(em.buf)
	}
	em.buf = em.buf[:0]
}

// canon emits raw, one JSON value that json.Valid accepted, in the
// relay's canonical form: no whitespace; every string (member names too)
// written from its decoded value, with only '"', '\' and control
// characters escaped, so that invalid UTF-8 and lone surrogates are
// U+FFFD, as encoding/json decodes them; numbers, true, false and null as
// written.
func (em *emitter) canon(raw []byte) {
	for i := 0; i < len(raw); {
		switch raw[i] {
		case '"':
			end := skipString(raw, i)
			em.canonString(raw[i:end])
			i = end
		case ' ', '\t', '\n', '\r':
			i++
		default:
			start := i
			for i < len(raw) && raw[i] != '"' && raw[i] != ' ' && raw[i] != '\t' && raw[i] != '\n' && raw[i] != '\r' {
				i++
			}
			em.write(raw[start:i])
		}
	}
}

// canonString emits a quoted JSON string json.Valid accepted. One with no
// escape and valid UTF-8 is its canonical form already.
func (em *emitter) canonString(quoted []byte) {
	body := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		em.write(quoted)
		return
	}
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		panic("BUG(sandbox-run): mcp: a string json.Valid accepted does not decode: " + err.Error())
	}
	em.buf = appendString(em.buf, s)
	if len(em.buf) >= emitChunk {
		em.flush()
	}
}

// appendCanon appends raw in canonical form (see emitter.canon).
func appendCanon(dst, raw []byte) []byte {
	em := emitter{buf: dst}
	em.canon(raw)
	return em.buf
}

// appendString appends s, valid UTF-8, as a JSON string: '"', '\' and
// control characters escaped, nothing else.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// outMsg is a message as the relay writes it: the members it judged, in
// a fixed order, each value in canonical form. Members of the envelope
// other than these are not written (the documented rule: unknown envelope
// members are dropped).
type outMsg struct {
	id     json.RawMessage // nil: a notification
	method string          // "": a response
	params json.RawMessage // nil: none
	result json.RawMessage
	err    json.RawMessage // written instead of result when set
}

// out is e's own members, to be written as they were judged.
func (e envelope) out() outMsg {
	m := outMsg{id: e.id, method: e.method, result: e.obj["result"], err: e.obj["error"]}
	if p, ok := e.obj["params"]; ok && string(p) != "null" {
		m.params = p
	}
	return m
}

// emit emits m as one line.
func (m outMsg) emit(em *emitter) {
	em.write([]byte(`{"jsonrpc":"2.0"`))
	if m.id != nil {
		em.write([]byte(`,"id":`))
		em.canon(m.id)
	}
	if m.method != "" {
		em.buf = appendString(append(em.buf, `,"method":`...), m.method)
	}
	if m.params != nil {
		em.write([]byte(`,"params":`))
		em.canon(m.params)
	}
	switch {
	case m.err != nil:
		em.write([]byte(`,"error":`))
		em.canon(m.err)
	case m.result != nil:
		em.write([]byte(`,"result":`))
		em.canon(m.result)
	}
	em.write([]byte("}\n"))
}

// appendTo appends m as one line.
func (m outMsg) appendTo(dst []byte) []byte {
	em := emitter{buf: dst}
	m.emit(&em)
	return em.buf
}
