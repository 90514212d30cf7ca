package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// errAmbiguous marks a JSON object that two parsers could read differently:
// a key given twice, or two keys equal but for case (encoding/json matches
// struct fields case-insensitively, JSON.parse does not). The relay refuses
// such messages rather than guess which reading the other side will use.
var errAmbiguous = errors.New("ambiguous JSON object: a key repeated or differing only in case")

// object is a JSON object's top-level members, matched exactly.
type object map[string]json.RawMessage

// parseObject reads raw as one JSON object. It fails on anything else, on
// trailing data and, with errAmbiguous, on keys that repeat or fold together.
// The members' values are sub-slices of raw.
func parseObject(raw []byte) (object, error) {
	// json.Valid first: after it, the walk below can trust the syntax.
	if !json.Valid(raw) {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		return nil, errors.New("invalid JSON")
	}
	return walkObject(raw)
}

// walkObject is parseObject for raw that json.Valid accepted, on its own
// or as a member of a message it accepted.
func walkObject(raw []byte) (object, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, errors.New("not a JSON object")
	}
	i++
	obj := object{}
	var keysBuf [8]string
	keys := keysBuf[:0]
	for {
		i = skipSpace(raw, i)
		if raw[i] == '}' {
			break
		}
		end := skipString(raw, i)
		key := string(raw[i+1 : end-1])
		if needsDecoding(raw[i:end]) {
			if err := json.Unmarshal(raw[i:end], &key); err != nil {
				return nil, err
			}
		}
		for _, k := range keys {
			if strings.EqualFold(k, key) {
				return nil, errAmbiguous
			}
		}
		keys = append(keys, key)
		i = skipSpace(raw, end) + 1 // the colon
		i = skipSpace(raw, i)
		vend := skipValue(raw, i)
		obj[key] = raw[i:vend]
		i = skipSpace(raw, vend)
		if raw[i] == ',' {
			i++
		}
	}
	return obj, nil
}

// needsDecoding says a key holds an escape or a non-ASCII byte, which
// encoding/json decodes (invalid UTF-8 becomes U+FFFD); plain ASCII keys are
// their own bytes.
func needsDecoding(quoted []byte) bool {
	for _, c := range quoted {
		if c == '\\' || c >= 0x80 {
			return true
		}
	}
	return false
}

// skipSpace, skipString and skipValue walk JSON that json.Valid accepted.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i].
func skipString(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !bytes.ContainsRune([]byte(",}] \t\r\n"), rune(b[i])) {
		i++
	}
	return i
}

// has reports whether the member exists, null or not.
func (o object) has(k string) bool { _, ok := o[k]; return ok }

// str returns a string member, "" when absent or not a string.
func (o object) str(k string) string {
	v, ok := o[k]
	if !ok || len(v) < 2 || v[0] != '"' {
		return ""
	}
	if body := v[1 : len(v)-1]; bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body) // as encoding/json would decode it
	}
	var s string
	json.Unmarshal(v, &s)
	return s
}

// kind is what a JSON-RPC message is.
type kind int

const (
	kindInvalid      kind = iota
	kindRequest           // method and id
	kindNotification      // method, no id
	kindResponse          // id and result or error, no method
)

// Errors about a message's id. MCP forbids a null id ("Unlike base
// JSON-RPC, the ID MUST NOT be null") and allows strings and integers; the
// relay refuses anything else rather than guess how the other side would
// read it.
var (
	errNullID = errors.New("the id is null, which MCP forbids")
	errBadID  = errors.New("the id is not a string or an integer")
)

// maxIDBytes bounds an id as written, so that a pending request's record
// stays small.
const maxIDBytes = 256

// envelope is one parsed JSON-RPC message.
type envelope struct {
	raw    []byte // the message as it came, trimmed
	obj    object
	kind   kind
	method string
	id     json.RawMessage // as written (a sub-slice of raw); nil when absent
	idKey  string          // the id's exact value (see idKey)
	p      object          // the params, read by parseEnvelope
}

// idKey returns a key that is equal for two ids exactly when they are the
// same JSON value: a string by its decoded text, an integer by its digits.
// No float conversion takes place, so 9007199254740992 (2^53) and
// 9007199254740993 differ. Fractions, exponents, null, and anything but a
// string or an integer are refused.
func idKey(raw json.RawMessage) (string, error) {
	switch {
	case len(raw) == 0:
		return "", errBadID
	case string(raw) == "null":
		return "", errNullID
	case len(raw) > maxIDBytes:
		return "", fmt.Errorf("the id is over %d bytes", maxIDBytes)
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", errBadID
		}
		return "s:" + s, nil
	}
	digits := raw
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || (digits[0] == '0' && len(digits) > 1) {
		return "", errBadID
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return "", errBadID
		}
	}
	if string(raw) == "-0" {
		return "n:0", nil
	}
	return "n:" + string(raw), nil
}

// errNoID marks a message that names a request method but has no id.
// MCP's notifications are the methods under notifications/; anything
// else is a request, which a server may run (one that dispatches on the
// method alone) while no side waits for its answer, judges it as a
// request or audits it. The relay refuses it, whatever the method, known
// to it or not.
var errNoID = errors.New("the message has no id, and only notifications/* methods are notifications")

// isNotification says method is one MCP defines as a notification.
func isNotification(method string) bool { return strings.HasPrefix(method, "notifications/") }

// parseEnvelope reads one JSON-RPC message strictly: one object that
// parsers cannot read two ways (see parseObject), member names exact at
// every level the relay reads (see memberSet), jsonrpc "2.0", params an
// object, an id only of the kinds idKey accepts, and a method without an
// id only when it is a notification. On error, e holds what could be
// read exactly (the id, the method), for the answer.
func parseEnvelope(raw []byte) (envelope, error) {
	obj, err := parseObject(raw)
	if err != nil {
		return envelope{raw: raw}, err
	}
	e := envelope{raw: raw, obj: obj, method: obj.str("method")}
	if obj.has("id") {
		e.id = obj["id"]
		if e.idKey, err = idKey(e.id); err != nil {
			return e, err
		}
	}
	if err := e.strict(); err != nil {
		return e, err
	}
	hasResult := obj.has("result") || obj.has("error")
	switch {
	case obj.has("method") && e.method == "":
		return e, fmt.Errorf("method is not a non-empty string")
	case e.method != "" && hasResult:
		return e, fmt.Errorf("message is both a request and a response")
	case e.method != "" && obj.has("id"):
		e.kind = kindRequest
	case e.method != "" && !isNotification(e.method):
		return e, fmt.Errorf("%w; %s is a request method", errNoID, capString(fmt.Sprintf("%q", e.method)))
	case e.method != "":
		e.kind = kindNotification
	case obj.has("params"):
		return e, fmt.Errorf("a response with params")
	case obj.has("id") && hasResult:
		e.kind = kindResponse
	default:
		return e, fmt.Errorf("neither a request, a notification nor a response")
	}
	return e, nil
}

// strict checks the envelope's member names and jsonrpc, and reads the
// params into e.p, checking theirs and their _meta's.
func (e *envelope) strict() error {
	if err := envelopeMembers.check(e.obj); err != nil {
		return err
	}
	if v := e.obj["jsonrpc"]; string(v) != `"2.0"` && e.obj.str("jsonrpc") != "2.0" {
		return errors.New(`jsonrpc is not "2.0"`)
	}
	raw, ok := e.obj["params"]
	if !ok || string(raw) == "null" {
		e.p = object{}
		return nil
	}
	// The whole message passed json.Valid: no need to check it again.
	p, err := walkObject(raw)
	if err != nil {
		return fmt.Errorf("params: %w", err)
	}
	if err := paramsMembers.check(p); err != nil {
		return fmt.Errorf("params: %w", err)
	}
	if m, ok := p["_meta"]; ok && len(m) > 0 && m[0] == '{' {
		meta, err := walkObject(m)
		if err == nil {
			err = metaMembers.check(meta)
		}
		if err != nil {
			return fmt.Errorf("params._meta: %w", err)
		}
	}
	e.p = p
	return nil
}

// params returns the message's params as an object; an absent or null
// params is an empty object.
func (e envelope) params() (object, error) {
	if e.p != nil {
		return e.p, nil
	}
	return nil, errors.New("params not read")
}

// splice returns a copy of whole with sub, which must be a sub-slice of
// whole (a member value from parseObject), replaced by repl. Every other
// byte stays as it was.
func splice(whole, sub, repl []byte) []byte {
	start := cap(whole) - cap(sub)
	if start < 0 || start+len(sub) > len(whole) {
		panic("BUG(sandbox-run): mcp: splice of a slice from another message")
	}
	out := make([]byte, 0, len(whole)-len(sub)+len(repl)+1)
	out = append(out, whole[:start]...)
	out = append(out, repl...)
	return append(out, whole[start+len(sub):]...)
}

// nullID is the id of an error response to a message whose id could not
// be read.
var nullID = json.RawMessage("null")

// errorLine renders a JSON-RPC error response to id (as written) as one
// line.
func errorLine(id json.RawMessage, code int, msg string, data any) []byte {
	if len(id) == 0 {
		id = nullID
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{Code: code, Message: msg, Data: data}})
	if err != nil {
		// id was validated by idKey and data is built by this package.
		panic("BUG(sandbox-run): mcp: cannot encode an error response: " + err.Error())
	}
	return append(b, '\n')
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}
