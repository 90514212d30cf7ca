package procid

import (
	"strconv"
	"strings"
)

// ID names a process: PID and Start as read in the namespaces that NS
// names (see Token). NS is "" in a legacy name, made before names carried
// it.
type ID struct {
	PID   int
	Start uint64
	NS    string
}

// String is the name as run directories carry it: PID.START.NS, or
// PID.START for a legacy ID. It holds no '-' (a run directory's name ends
// in -RANDOM) and no '/'.
func (id ID) String() string {
	s := strconv.Itoa(id.PID) + "." + strconv.FormatUint(id.Start, 10)
	if id.NS != "" {
		s += "." + id.NS
	}
	return s
}

// ParseError is a name that is not an ID's String.
type ParseError struct{ Name string }

func (e *ParseError) Error() string { return "procid: malformed process name " + strconv.Quote(e.Name) }

// Parse reads an ID's String: PID.START.NS, or the legacy PID.START (NS
// ""). A pid is positive, a start time a decimal number, NS a token
// (lower-case hex digits and 't'); anything else is a *ParseError.
func Parse(s string) (ID, error) {
	f := strings.Split(s, ".")
	if len(f) < 2 || len(f) > 3 {
		return ID{}, &ParseError{s}
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 || f[0][0] == '+' {
		return ID{}, &ParseError{s}
	}
	id := ID{PID: pid, Start: start}
	if len(f) == 3 {
		if !validToken(f[2]) {
			return ID{}, &ParseError{s}
		}
		id.NS = f[2]
	}
	return id, nil
}

// validToken says whether t can be a Token: non-empty, of lower-case hex
// digits and 't' only.
func validToken(t string) bool {
	if t == "" || len(t) > 32 {
		return false
	}
	for _, c := range t {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && c != 't' {
			return false
		}
	}
	return true
}
