package secret

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Refusal reason codes, as the proxy puts them in its audit and its
// X-Sandbox-Refusal header.
const (
	// ReasonElsewhere: a placeholder went to a host its credential is not
	// bound to (or the Host header names another host than the one the
	// request goes to).
	ReasonElsewhere = "secret-elsewhere"
	// ReasonPlaintext: a placeholder went to a bound host without TLS.
	ReasonPlaintext = "secret-plaintext"
	// ReasonBodyTooLarge: a request to a host bound with InBody has a body
	// over MaxBody, which Apply will not hold to substitute.
	ReasonBodyTooLarge = "secret-body-too-large"
	// ReasonBodyUnreadable: the body could not be read to look for a
	// placeholder.
	ReasonBodyUnreadable = "secret-body-unreadable"
)

// Refusal says why a request must not be forwarded. It names the
// credential and the host, never a value.
type Refusal struct {
	Name   string // the credential whose placeholder the request carried
	Host   string // the host the request was going to
	Reason string // one of the Reason codes
}

// Status is the HTTP status of the refusal: 413 for a body too large, 403
// otherwise.
func (r *Refusal) Status() int {
	if r.Reason == ReasonBodyTooLarge {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusForbidden
}

// Error is the one line a client and the audit get: what, why, the fix.
func (r *Refusal) Error() string {
	switch r.Reason {
	case ReasonPlaintext:
		return fmt.Sprintf("refused: the request to %s carries the placeholder of secret %s over plain HTTP; fix: use https:// (the secret is swapped in only over TLS)", r.Host, r.Name)
	case ReasonBodyTooLarge:
		return fmt.Sprintf("refused: the request to %s has a body over %d bytes, which secret %s is swapped into; fix: send a smaller body, or bind %s without --secret-in body", r.Host, MaxBody, r.Name, r.Name)
	case ReasonBodyUnreadable:
		return fmt.Sprintf("refused: the body of the request to %s could not be read to look for the placeholders of secrets swapped in bodies; fix: resend it", r.Host)
	}
	return fmt.Sprintf("refused: the request to %s carries the placeholder of secret %s, which is bound to other hosts; fix: bind it to this host too (--secret %s@HOST,...) or do not send it here", r.Host, r.Name, r.Name)
}

// Decision is what Apply did to one request.
type Decision struct {
	// Swapped names the credentials whose placeholder was replaced by
	// the real value, each once, in the order of the Set.
	Swapped []string
	// Refused, when not nil, means the request must not be forwarded.
	Refused *Refusal
}

// Apply judges r, which is about to be forwarded to host (host or
// host:port: where the proxy connects, the CONNECT target or the URL's
// host), and over TLS or not. It replaces each placeholder with its real
// value in r's headers, query and (InBody) body when over TLS and both
// host and r.Host are bound to that credential; otherwise a request that
// carries a placeholder is refused, and r is left as it was. It reads the
// body only when some credential is bound with InBody, up to MaxBody, and
// leaves r.Body readable from the start. A nil Set refuses nothing.
func (s *Set) Apply(r *http.Request, host string, overTLS bool) Decision {
	if s == nil || len(s.items) == 0 {
		return Decision{}
	}
	host, target, header := targets(r, host, overTLS)
	body, over, err := s.peekBody(r)
	if err != nil {
		return Decision{Refused: &Refusal{Host: host, Reason: ReasonBodyUnreadable}}
	}
	swapped, refused := s.judge(r, body, over, overTLS, host, target, header)
	if refused != nil {
		return Decision{Refused: refused}
	}
	if len(swapped) == 0 {
		return Decision{}
	}
	s.swap(r, body, swapped)
	return Decision{Swapped: swapped}
}

// targets returns the request's host name, the host:port it goes to and
// the host:port its Host header names (the target when it names none),
// with the scheme's default port where none is given.
func targets(r *http.Request, host string, overTLS bool) (name, target, header string) {
	def := "80"
	if overTLS {
		def = "443"
	}
	name, port := splitPort(host, def)
	target = net.JoinHostPort(name, port)
	header = target
	if r.Host != "" {
		h, p := splitPort(r.Host, def)
		header = net.JoinHostPort(h, p)
	}
	return name, target, header
}

// judge returns the secrets whose placeholders r carries, each bound to
// target and sent over TLS with a Host header naming target; any other
// placeholder carried, or a bound body past MaxBody (over), refuses r.
func (s *Set) judge(r *http.Request, body *peeked, over, overTLS bool, host, target, header string) ([]string, *Refusal) {
	var swapped []string
	for _, it := range s.items {
		if !carries(r, it, body) {
			continue
		}
		switch {
		case !overTLS && bound(it.hosts, target, true):
			return nil, &Refusal{Name: it.name, Host: host, Reason: ReasonPlaintext}
		case !overTLS || !bound(it.hosts, target, false) || header != target:
			return nil, &Refusal{Name: it.name, Host: host, Reason: ReasonElsewhere}
		}
		swapped = append(swapped, it.name)
	}
	for _, it := range s.items {
		// Past MaxBody a placeholder would go on unswapped: refuse.
		if over && it.inBody && bound(it.hosts, target, false) {
			return nil, &Refusal{Name: it.name, Host: host, Reason: ReasonBodyTooLarge}
		}
	}
	return swapped, nil
}

// swap puts the real values of the swapped secrets in r's headers, query
// and (for those told to) body.
func (s *Set) swap(r *http.Request, body *peeked, swapped []string) {
	for _, it := range s.items {
		if contains(swapped, it.name) {
			swapHeaders(r.Header, it)
			r.URL.RawQuery = swapQuery(r.URL.RawQuery, it)
			if it.inBody && body != nil {
				body.b = bytes.ReplaceAll(body.b, []byte(it.placeholder), []byte(it.real))
			}
		}
	}
	if body != nil {
		r.Body = body.reader()
	}
	// An upstream that echoes the credential is scrubbed by
	// ScrubResponse, which cannot read a compressed body.
	r.Header.Set("Accept-Encoding", "identity")
}

// peeked is a request body read up to MaxBody, and the rest unread.
type peeked struct {
	b    []byte
	rest io.ReadCloser
}

func (p *peeked) reader() io.ReadCloser {
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(p.b), p.rest), p.rest}
}

// peekBody reads r's body up to MaxBody when some credential is bound
// with InBody, and puts it back; over says the body is longer.
func (s *Set) peekBody(r *http.Request) (*peeked, bool, error) {
	if r.Body == nil || r.Body == http.NoBody || !s.anyInBody() {
		return nil, false, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return nil, false, err
	}
	p := &peeked{b: b, rest: r.Body}
	r.Body = p.reader()
	return p, len(b) > MaxBody, nil
}

func (s *Set) anyInBody() bool {
	for _, it := range s.items {
		if it.inBody {
			return true
		}
	}
	return false
}

// carries reports whether r holds it's placeholder where Apply looks.
func carries(r *http.Request, it item, body *peeked) bool {
	for k, vs := range r.Header {
		for _, v := range vs {
			if hasPlaceholder(v, it) {
				return true
			}
			if isAuth(k) {
				if dec, ok := basic(v); ok && strings.Contains(dec, it.placeholder) {
					return true
				}
			}
		}
	}
	if hasPlaceholder(r.URL.RawQuery, it) || hasPlaceholder(r.URL.EscapedPath(), it) || strings.Contains(r.URL.Path, it.placeholder) {
		return true
	}
	if it.inBody && body != nil {
		for _, form := range spellings(it.placeholder) {
			if bytes.Contains(body.b, []byte(form)) {
				return true
			}
		}
	}
	return false
}

func hasPlaceholder(v string, it item) bool {
	for _, form := range spellings(it.placeholder) {
		if strings.Contains(v, form) {
			return true
		}
	}
	return false
}

// spellings are the forms in which a value is looked for: as it is,
// percent-encoded for a query and a path, and base64 (standard and URL
// alphabets) of the value alone.
func spellings(v string) []string {
	out := []string{v}
	for _, f := range []string{url.QueryEscape(v), url.PathEscape(v),
		base64.StdEncoding.EncodeToString([]byte(v)), base64.RawStdEncoding.EncodeToString([]byte(v)),
		base64.URLEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v))} {
		if !contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

func isAuth(k string) bool {
	return strings.EqualFold(k, "Authorization") || strings.EqualFold(k, "Proxy-Authorization")
}

// basic decodes the credentials of a Basic authorization header value.
func basic(v string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", false
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", false
	}
	return string(dec), true
}

// swapHeaders replaces it's placeholder in every header value, inside
// Basic credentials too.
func swapHeaders(h http.Header, it item) {
	for k, vs := range h {
		for i, v := range vs {
			if isAuth(k) {
				if dec, ok := basic(v); ok && strings.Contains(dec, it.placeholder) {
					v = "Basic " + base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(dec, it.placeholder, it.real)))
				}
			}
			vs[i] = strings.ReplaceAll(v, it.placeholder, it.real)
		}
	}
}

// swapQuery replaces it's placeholder, as it is or percent-encoded, by the
// real value percent-encoded.
func swapQuery(q string, it item) string {
	real := url.QueryEscape(it.real)
	q = strings.ReplaceAll(q, url.QueryEscape(it.placeholder), real)
	return strings.ReplaceAll(q, it.placeholder, real)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// SwapHeaders replaces the placeholder of the credential name with its
// real value in h's values (inside Basic credentials too), whatever the
// host: for a relay outside the proxy, such as the LLM channel's, that
// itself is the credential's only destination. It reports whether h
// carried the placeholder.
func (s *Set) SwapHeaders(h http.Header, name string) bool {
	if s == nil {
		return false
	}
	for _, it := range s.items {
		if it.name != name {
			continue
		}
		found := false
		for k, vs := range h {
			for _, v := range vs {
				dec, ok := basic(v)
				if strings.Contains(v, it.placeholder) || (isAuth(k) && ok && strings.Contains(dec, it.placeholder)) {
					found = true
				}
			}
		}
		swapHeaders(h, it)
		return found
	}
	return false
}

// Value calls f with the real value of the credential name (false when
// there is none), for a relay that adds a credential the request did not
// carry. f must put it only into the request it is building.
func (s *Set) Value(name string, f func(real string)) bool {
	if s == nil {
		return false
	}
	for _, it := range s.items {
		if it.name == name {
			f(it.real)
			return true
		}
	}
	return false
}
