package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrURI marks a resource URI the relay cannot put in canonical form, so
// it cannot say how a server will read it.
var ErrURI = errors.New("resource URI not in a form the relay can judge")

// uriError says what is wrong with a resource URI; it wraps ErrURI.
type uriError struct{ why string }

func (e *uriError) Error() string { return "resource URI: " + e.why }
func (e *uriError) Unwrap() error { return ErrURI }

func badURI(format string, a ...any) error { return &uriError{fmt.Sprintf(format, a...)} }

// specialPorts are the WHATWG URL Standard's special schemes and their
// default ports (file has none). The TypeScript SDK looks resources up by
// `new URL(uri).toString()`, so these rules are what its servers read.
var specialPorts = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443", "ftp": "21", "file": ""}

// uriParts is a URI split the way the WHATWG URL Standard serialises it.
type uriParts struct {
	scheme    string
	authority bool   // "//" follows the scheme
	userinfo  string // without '@'; "" for none
	host      string
	port      string // digits, no leading zeros; "" for none or default
	path      string
	query     *string
	fragment  *string
}

func (u uriParts) String() string {
	var b strings.Builder
	b.WriteString(u.scheme + ":")
	if u.authority {
		b.WriteString("//")
		if u.userinfo != "" {
			b.WriteString(u.userinfo + "@")
		}
		b.WriteString(u.host)
		if u.port != "" {
			b.WriteString(":" + u.port)
		}
	}
	b.WriteString(u.path)
	if u.query != nil {
		b.WriteString("?" + *u.query)
	}
	if u.fragment != nil {
		b.WriteString("#" + *u.fragment)
	}
	return b.String()
}

// CanonicalURI returns uri in the relay's canonical form: what the WHATWG
// URL Standard (Node's `new URL(uri).href`, the TypeScript SDK's resource
// lookup) makes of it, then normalised as RFC 3986 section 6.2.2 allows
// without changing what the URI names: the host lower-cased, percent-
// encoded unreserved characters (letters, digits, '-', '.', '_', '~')
// decoded and every other percent-encoding in upper case. The result is
// its own canonical form, and the WHATWG parser serialises it unchanged.
//
// Input the WHATWG parser reads in ways that depend on more than this
// (backslashes, IPv4 shorthand, IPv6 and international hosts, Windows
// drive letters, extra slashes after a special scheme, malformed
// percent-encoding, control characters, a '..' above the root) is refused
// with an error wrapping ErrURI.
func CanonicalURI(uri string) (string, error) {
	u, err := parseWHATWG(uri)
	if err != nil {
		return "", err
	}
	return u.canonical().String(), nil
}

// parseWHATWG splits uri as the WHATWG URL parser does, or refuses it.
// Its String is Node's `new URL(uri).href` for every input it accepts.
func parseWHATWG(uri string) (uriParts, error) {
	s := strings.Trim(uri, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"+
		"\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")
	s = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
	if !utf8.ValidString(s) {
		return uriParts{}, badURI("not valid UTF-8")
	}
	for _, c := range s {
		switch {
		case c < 0x20 || c == 0x7f:
			return uriParts{}, badURI("holds a control character")
		case c < 0x80 && strings.ContainsRune("\\^`{|}", c):
			return uriParts{}, badURI("holds %q, which URL parsers read differently", c)
		}
	}
	var u uriParts
	colon := strings.IndexByte(s, ':')
	if colon < 1 || !validScheme(s[:colon]) {
		return u, badURI("no scheme")
	}
	u.scheme, s = strings.ToLower(s[:colon]), s[colon+1:]
	_, special := specialPorts[u.scheme]
	s, u.fragment = cutOptional(s, '#')
	s, u.query = cutOptional(s, '?')
	if strings.HasPrefix(s, "//") {
		u.authority = true
		end := strings.IndexByte(s[2:], '/')
		if end < 0 {
			end = len(s) - 2
		}
		if err := u.parseAuthority(s[2:2+end], special); err != nil {
			return u, err
		}
		s = s[2+end:]
	} else if special {
		return u, badURI("a %s: URI without '//' is read in more than one way", u.scheme)
	}
	if err := u.parsePath(s, special); err != nil {
		return u, err
	}
	return u, u.encodeRest(special)
}

func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		alpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !alpha && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// cutOptional splits s at the first sep; the part after it is nil when
// sep is absent (an empty query differs from none).
func cutOptional(s string, sep byte) (string, *string) {
	i := strings.IndexByte(s, sep)
	if i < 0 {
		return s, nil
	}
	rest := s[i+1:]
	return s[:i], &rest
}

func (u *uriParts) parseAuthority(a string, special bool) error {
	if at := strings.LastIndexByte(a, '@'); at >= 0 {
		user, pass, _ := strings.Cut(a[:at], ":")
		for _, part := range []string{user, pass} {
			if !allIn(part, unreservedOrSub) {
				return badURI("the user or password holds characters URL parsers encode differently")
			}
		}
		// An empty password is written as none, an empty user and
		// password as no userinfo.
		switch {
		case pass != "":
			u.userinfo = user + ":" + pass
		case user != "":
			u.userinfo = user
		}
		a = a[at+1:]
	}
	host, port, hasPort := strings.Cut(a, ":")
	if u.scheme == "file" && (hasPort || u.userinfo != "" || strings.Contains(a, "@")) {
		return badURI("a file: URI with a user or a port")
	}
	if hasPort {
		p, err := canonicalPort(port)
		if err != nil {
			return err
		}
		if def, ok := specialPorts[u.scheme]; !ok || p != def {
			u.port = p
		}
	}
	if special {
		return u.specialHost(host)
	}
	if !allIn(host, unreservedOrSub) {
		return badURI("the host %q holds characters URL parsers read differently", capString(host))
	}
	u.host = host
	return nil
}

func canonicalPort(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	if !allIn(p, "0123456789") {
		// Not quoted: without an '@', "user:password" reads as host:port.
		return "", badURI("the port is not a number")
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", badURI("the port is over 65535")
	}
	return strconv.FormatUint(n, 10), nil
}

// specialHost accepts the hosts of special schemes that the WHATWG
// parser only lower-cases: ASCII domain names whose last label is not a
// number, and dotted-decimal IPv4 addresses as written canonically.
func (u *uriParts) specialHost(h string) error {
	h = strings.ToLower(h)
	if u.scheme == "file" && h == "localhost" {
		h = ""
	}
	if h == "" {
		if u.scheme != "file" || u.userinfo != "" || u.port != "" {
			return badURI("no host")
		}
		return nil
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || !allIn(l, "abcdefghijklmnopqrstuvwxyz0123456789-_") {
			return badURI("the host %q is not a plain ASCII domain name", capString(h))
		}
	}
	if last := labels[len(labels)-1]; allIn(last, "0123456789") || strings.HasPrefix(last, "0x") {
		if len(labels) != 4 || !canonicalIPv4(labels) {
			return badURI("the host %q is a number not written as a.b.c.d", capString(h))
		}
	}
	u.host = h
	return nil
}

func canonicalIPv4(labels []string) bool {
	for _, l := range labels {
		n, err := strconv.ParseUint(l, 10, 8)
		if err != nil || strconv.FormatUint(n, 10) != l {
			return false
		}
	}
	return true
}

// parsePath removes dot segments as the WHATWG parser does ('.', '..' and
// their percent-encoded spellings, case-insensitively) from a path that
// starts with '/' or follows an authority; other paths are opaque.
func (u *uriParts) parsePath(p string, special bool) error {
	if !u.authority && !strings.HasPrefix(p, "/") {
		u.path = p
		return nil
	}
	if special && p == "" {
		p = "/"
	}
	if p == "" {
		return nil
	}
	var out []string
	segs := strings.Split(p[1:], "/")
	for i, seg := range segs {
		if u.scheme == "file" && len(seg) == 2 && isAlpha(seg[0]) && seg[1] == ':' {
			// '..' does not climb over it, on Windows a path starts there.
			return badURI("a Windows drive letter in a file: URI is read in more than one way")
		}
		last := i == len(segs)-1
		switch strings.ToLower(seg) {
		case "..", ".%2e", "%2e.", "%2e%2e":
			if len(out) == 0 {
				// Node's parser and the standard differ here, and a
				// server joining paths may climb out of its root.
				return badURI("a '..' above the root")
			}
			out = out[:len(out)-1]
			if last {
				out = append(out, "")
			}
		case ".", "%2e":
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	u.path = "/" + strings.Join(out, "/")
	if !u.authority && strings.HasPrefix(u.path, "//") {
		// WHATWG writes "/." before such a path; refuse instead.
		return badURI("a path starting with '//' without a host")
	}
	return nil
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// encodeRest percent-encodes what the WHATWG parser encodes in the path,
// query and fragment (space, '"', '<', '>', and '\” in a special
// scheme's query; every non-ASCII character as UTF-8) and checks every
// '%' starts an escape.
func (u *uriParts) encodeRest(special bool) error {
	pathSet := ` "<>`
	if !u.authority && !strings.HasPrefix(u.path, "/") {
		// An opaque path: WHATWG encodes only what is not printable
		// ASCII there, and may drop trailing spaces.
		if strings.ContainsAny(u.path, ` "<>`) {
			return badURI("a space, '\"', '<' or '>' in an opaque path")
		}
		pathSet = ""
	}
	var err error
	if u.path, err = encodeSet(u.path, pathSet); err != nil {
		return err
	}
	if u.query != nil {
		set := ` "<>`
		if special {
			set += "'"
		}
		q, err := encodeSet(*u.query, set)
		if err != nil {
			return err
		}
		u.query = &q
	}
	if u.fragment != nil {
		f, err := encodeSet(*u.fragment, ` "<>`)
		if err != nil {
			return err
		}
		u.fragment = &f
	}
	return nil
}

const upperHex = "0123456789ABCDEF"

func encodeSet(s, set string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])):
			return "", badURI("a '%%' that starts no percent-encoding")
		case c >= 0x80 || strings.IndexByte(set, c) >= 0:
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

const (
	unreserved      = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
	unreservedOrSub = unreserved + "!$&'()*+,;=%"
)

func allIn(s, set string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(set, s[i]) < 0 {
			return false
		}
	}
	return true
}

// canonical applies RFC 3986's equivalences to a WHATWG-parsed URI: the
// host in lower case, unreserved characters decoded, escapes in upper
// case. No dot segment can appear: the WHATWG parser removed '%2e' ones.
func (u uriParts) canonical() uriParts {
	u.userinfo = normalEscapes(u.userinfo)
	u.host = strings.ToLower(normalEscapes(u.host))
	u.path = normalEscapes(u.path)
	if u.query != nil {
		q := normalEscapes(*u.query)
		u.query = &q
	}
	if u.fragment != nil {
		f := normalEscapes(*u.fragment)
		u.fragment = &f
	}
	return u
}

// normalEscapes decodes escapes of unreserved characters and writes the
// others in upper case; s holds only well-formed escapes.
func normalEscapes(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			b.WriteByte(s[i])
			continue
		}
		c := unhex(s[i+1])<<4 | unhex(s[i+2])
		if strings.IndexByte(unreserved, c) >= 0 {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(s[i+1:i+3]))
		}
		i += 2
	}
	return b.String()
}

// decodedReading is how a server that percent-decodes a URI before using
// it (as a file path, say) reads the canonical URI c: every escape
// decoded, '\' taken as '/', dot segments removed again. It equals c when
// no such server could read c as something else.
func decodedReading(c uriParts) string {
	d := c
	d.path = decodeAll(c.path)
	if strings.ContainsAny(d.path, "/\\") {
		d.path = removeDots(strings.ReplaceAll(d.path, "\\", "/"))
	}
	if c.query != nil {
		q := decodeAll(*c.query)
		d.query = &q
	}
	if c.fragment != nil {
		f := decodeAll(*c.fragment)
		d.fragment = &f
	}
	return d.String()
}

func decodeAll(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeDots is RFC 3986's remove_dot_segments on a path of '/'-separated
// segments, keeping a leading '/' and ending in '/' after a final dot
// segment.
func removeDots(p string) string {
	rooted := strings.HasPrefix(p, "/")
	if rooted {
		p = p[1:]
	}
	var out []string
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		last := i == len(segs)-1
		switch seg {
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case ".":
		default:
			out = append(out, seg)
			continue
		}
		if last {
			out = append(out, "")
		}
	}
	r := strings.Join(out, "/")
	if rooted {
		r = "/" + r
	}
	return r
}

// judgesResources says some rule hides resources: then a URI that has no
// canonical form is refused rather than passed unjudged.
func (r Rules) judgesResources() bool {
	return len(r.AllowResources) > 0 || len(r.DenyResources) > 0 || r.allowListMode()
}

// checkURI judges a resource URI the way servers read it: its canonical
// form (CanonicalURI), and how a server that percent-decodes it reads it
// (decodedReading). The resource is visible only when every reading is.
// canon is the canonical form, the one to forward, or "" when uri has
// none; such a URI is visible only when no rule judges resources.
// Patterns must be canonical already (Rules.canonicalPatterns).
func (r Rules) checkURI(uri string) (canon string, ok bool, rule string) {
	u, err := parseWHATWG(uri)
	if err != nil {
		if !r.judgesResources() {
			return "", true, ""
		}
		return "", false, err.Error() + ": the rules cannot judge it"
	}
	c := u.canonical()
	canon = c.String()
	if ok, rule := r.CheckKind(KindResource, canon); !ok {
		return canon, false, rule
	}
	if d := decodedReading(c); d != canon {
		if ok, rule := r.CheckKind(KindResource, d); !ok {
			return canon, false, fmt.Sprintf("%s, as a server that percent-decodes it reads it (%s)", rule, capString(auditURI(d)))
		}
	}
	return canon, true, ""
}

// canonicalPatterns returns r with its resource patterns in the form
// canonical URIs take, so that a pattern names what a server reads.
func (r Rules) canonicalPatterns() Rules {
	r.AllowResources = canonicalPatternList(r.AllowResources)
	r.DenyResources = canonicalPatternList(r.DenyResources)
	return r
}

func canonicalPatternList(pats []string) []string {
	if pats == nil {
		return nil
	}
	out := make([]string, len(pats))
	for i, p := range pats {
		out[i] = CanonicalPattern(p)
	}
	return out
}

// CanonicalPattern writes a --allow-resource or --deny-resource glob as
// CanonicalURI writes the URIs it is to match: the scheme in lower case;
// after "//", the authority in lower case and without a special scheme's
// default port; percent-encoding normalised; and dot segments removed
// from the path (up to the first '?' or '#', since '?' is also a glob
// character). '*' and '?' stay as they are. A pattern without a scheme
// only has its percent-encoding normalised.
func CanonicalPattern(p string) string {
	colon := strings.IndexByte(p, ':')
	if colon < 1 || !validScheme(p[:colon]) {
		return normalEscapes(p)
	}
	scheme, rest := strings.ToLower(p[:colon]), p[colon+1:]
	out := scheme + ":"
	def, special := specialPorts[scheme]
	if strings.HasPrefix(rest, "//") {
		end := strings.IndexAny(rest[2:], "/?#")
		if end < 0 {
			end = len(rest) - 2
		}
		auth := strings.ToLower(normalEscapes(rest[2 : 2+end]))
		plain := !strings.ContainsAny(auth, "*?")
		if special && plain {
			auth = strings.TrimSuffix(strings.TrimSuffix(auth, ":"+def), ":")
		}
		out += "//" + auth
		rest = rest[2+end:]
		if special && plain && rest == "" {
			rest = "/"
		}
	}
	end := strings.IndexAny(rest, "?#")
	if end < 0 {
		end = len(rest)
	}
	path := normalEscapes(rest[:end])
	if strings.HasPrefix(path, "/") {
		path = removeDots(path)
	}
	return out + path + normalEscapes(rest[end:])
}

// judgeResource judges the URI a request names and, when its canonical
// form differs from what was sent, sets the call to forward that form.
// completion/complete may name a URI template, which has no canonical
// form: such a name is judged as written, as the TypeScript SDK looks it
// up.
func (r *relay) judgeResource(c *call, raw []byte, uri string) (ok bool, rule string) {
	canon, ok, rule := r.rules.checkURI(uri)
	if c.method == methodComplete {
		if rawOK, rawRule := r.rules.CheckKind(KindResource, uri); !rawOK || canon == "" {
			return rawOK, rawRule
		}
		return ok, rule
	}
	if canon != "" && canon != uri {
		c.name, c.uriSent, c.uriRaw = canon, uri, raw
	}
	return ok, rule
}

// listedVisible says whether a list entry named name is visible: a
// resource's URI as checkURI judges it, a template as written.
func (r *relay) listedVisible(l listing, name string) bool {
	if l.field == "uri" {
		_, ok, _ := r.rules.checkURI(name)
		return ok
	}
	ok, _ := r.rules.CheckKind(l.kind, name)
	return ok
}

// forwardedParams returns the params to forward: the request's, or a
// copy whose URI is the canonical form the relay judged (invariant 14: the
// server reads what was judged).
func forwardedParams(params json.RawMessage, c *call) json.RawMessage {
	if c.uriRaw == nil {
		return params
	}
	repl, err := json.Marshal(c.name)
	if err != nil {
		panic("BUG(sandbox-run): mcp: cannot encode a string: " + err.Error())
	}
	return splice(params, c.uriRaw, repl)
}
