// Package secret keeps credentials outside the sandbox: each one is known
// inside only by a placeholder of the same shape, and the egress proxy
// swaps the placeholder for the real value in requests to the hosts the
// credential is bound to, over TLS, and nowhere else.
//
// # Guarantees
//
//   - A placeholder has the real value's length and, character by
//     character, its class (lower-case letter, upper-case letter, digit;
//     any other byte is kept), after a recognised prefix (ghp_, sk-ant-,
//     npm_, ...) kept as is, so that a tool's format check accepts it. It
//     is drawn from crypto/rand, differs from the real value, and no
//     placeholder contains, or is contained in, another placeholder or a
//     real value of the same Set.
//   - Apply replaces a placeholder only when the request came over TLS and
//     both the host it is forwarded to and its Host header name a host the
//     credential is bound to. A request that carries a placeholder anywhere
//     Apply looks, to any other host or over plaintext, is refused: Apply
//     says so and the caller must not forward it, with or without
//     substitution.
//   - Nothing this package returns or formats (a Decision, an error, an
//     audit field, a Report) holds a real value: real values are held
//     unexported and every string built from request data passes through
//     Redact.
//
// # Non-guarantees
//
//   - Apply looks in header values (Basic credentials decoded), the URL's
//     path and query and, for a credential bound with InBody, the body up
//     to MaxBody bytes. A placeholder in a compressed body, or one encoded
//     in a way other than those, is not seen: it goes on as the
//     placeholder, which is worthless outside.
//   - A real value is inserted as it is in headers and bodies, and
//     percent-encoded in a query; a value a header or a JSON body cannot
//     carry (a quote, a control byte) is the caller's to avoid.
//   - An upstream that echoes a credential back is answered by
//     ScrubResponse, which swaps real values back for placeholders in the
//     response's headers and uncompressed body; Apply asks for an
//     uncompressed response when it substituted.
package secret

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net"
	"regexp"
	"slices"
	"strings"
)

// MaxBody is the largest request body Apply reads to substitute or find a
// placeholder, for credentials bound with InBody. A larger body is refused.
const MaxBody = 4 << 20

// minRandom is the fewest characters a placeholder draws at random: fewer
// would let a placeholder turn up by chance in other text.
const minRandom = 12

// Spec is one credential as the caller resolved it: its name (the
// variable that holds the placeholder inside), its real value, the hosts
// it is bound to and where in a request it is swapped.
type Spec struct {
	Name  string
	Value string
	// Hosts are host names, each exact ("api.github.com") or a wildcard of
	// one or more labels ("*.github.com", not github.com itself). Case and
	// a trailing dot are ignored. Empty means no host: the placeholder is
	// refused everywhere the proxy sees it (a credential only a relay
	// outside the proxy swaps, such as the LLM key).
	Hosts []string
	// InBody also swaps the placeholder in request bodies up to MaxBody.
	InBody bool
}

// ErrSpec marks a Spec that cannot be used (Error wraps it); its message
// names the credential, never its value.
var ErrSpec = errors.New("secret: invalid credential")

// SpecError is a refused Spec: which credential and why.
type SpecError struct{ Name, Reason, Fix string }

func (e *SpecError) Error() string {
	return fmt.Sprintf("secret %s: %s; fix: %s", e.Name, e.Reason, e.Fix)
}

// Is matches ErrSpec.
func (e *SpecError) Is(target error) bool { return target == ErrSpec }

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// item is one credential with its placeholder.
type item struct {
	name        string
	real        string
	placeholder string
	hosts       []string
	inBody      bool
}

// Set is the run's credentials. It is safe for concurrent use and never
// changes after New.
type Set struct {
	items []item
}

// New draws a placeholder for each spec. It refuses a name that is not a
// variable name or given twice, a value that is empty, holds a NUL or a
// line break, or has fewer than 12 letters and digits past its prefix,
// and a host that is not a host name or a wildcard.
func New(specs []Spec) (*Set, error) {
	s := &Set{}
	for _, sp := range specs {
		if !nameRE.MatchString(sp.Name) {
			return nil, &SpecError{Name: fmt.Sprintf("%q", sp.Name), Reason: "not a variable name", Fix: "use letters, digits and _"}
		}
		if slices.ContainsFunc(s.items, func(it item) bool { return it.name == sp.Name }) {
			return nil, &SpecError{Name: sp.Name, Reason: "given twice", Fix: "bind one credential to all its hosts at once: NAME@HOST,HOST"}
		}
		if sp.Value == "" || strings.ContainsAny(sp.Value, "\x00\r\n") {
			return nil, &SpecError{Name: sp.Name, Reason: "its value is empty or holds a NUL or a line break", Fix: "set the variable or file to the credential alone"}
		}
		hosts, err := normHosts(sp.Name, sp.Hosts)
		if err != nil {
			return nil, err
		}
		s.items = append(s.items, item{name: sp.Name, real: sp.Value, hosts: hosts, inBody: sp.InBody})
	}
	for i := range s.items {
		ph, err := s.draw(i)
		if err != nil {
			return nil, err
		}
		s.items[i].placeholder = ph
	}
	return s, nil
}

// draw makes item i's placeholder, redrawing while it collides with a
// real value or another placeholder.
func (s *Set) draw(i int) (string, error) {
	it := s.items[i]
	for range 64 {
		ph, n := shape(it.real)
		if n < minRandom {
			return "", &SpecError{Name: it.name, Reason: fmt.Sprintf("its value has %d letters and digits past its prefix, fewer than %d", n, minRandom),
				Fix: "bind a real token; short values cannot be told apart from other text"}
		}
		if !s.collides(ph) {
			return ph, nil
		}
	}
	return "", &SpecError{Name: it.name, Reason: "no placeholder distinct from the other credentials could be drawn", Fix: "check that the credentials are not copies of each other"}
}

func (s *Set) collides(ph string) bool {
	for _, o := range s.items {
		if strings.Contains(o.real, ph) || strings.Contains(ph, o.real) {
			return true
		}
		if o.placeholder != "" && (strings.Contains(o.placeholder, ph) || strings.Contains(ph, o.placeholder)) {
			return true
		}
	}
	return false
}

// prefixes are the credential prefixes kept in a placeholder, longest
// first so that sk-ant-api03- wins over sk-.
var prefixes = []string{
	"sk-ant-api03-", "sk-ant-oat01-", "github_pat_", "sk-ant-", "sk-proj-", "sk-svcacct-",
	"glpat-", "xoxb-", "xoxp-", "xapp-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "npm_", "pypi-", "hf_", "AKIA", "sk-", "pk_", "rk_",
}

// shape returns a random string of v's shape and how many of its
// characters were drawn.
func shape(v string) (string, int) {
	pre := ""
	for _, p := range prefixes {
		if strings.HasPrefix(v, p) {
			pre = p
			break
		}
	}
	b := []byte(v)
	n := 0
	for i := len(pre); i < len(b); i++ {
		var set string
		switch c := b[i]; {
		case c >= 'a' && c <= 'z':
			set = "abcdefghijklmnopqrstuvwxyz"
		case c >= 'A' && c <= 'Z':
			set = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		case c >= '0' && c <= '9':
			set = "0123456789"
		default:
			continue
		}
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(set))))
		if err != nil {
			panic("secret: crypto/rand failed: " + err.Error()) // crypto/rand does not fail on supported systems
		}
		b[i] = set[k.Int64()]
		n++
	}
	return string(b), n
}

// normHosts checks a credential's hosts and writes each as host:port
// (port 443 when none is given), lower case, without a trailing dot.
func normHosts(name string, hosts []string) ([]string, error) {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		host, port := splitPort(h, "443")
		label := strings.TrimPrefix(host, "*.")
		if !hostRE.MatchString(label) || strings.Contains(label, "*") || !portRE.MatchString(port) {
			return nil, &SpecError{Name: name, Reason: fmt.Sprintf("host %q is not a host name or *.domain, with an optional :port", h), Fix: "bind it as NAME@api.example.com or NAME@*.example.com:8443"}
		}
		out = append(out, host+":"+port)
	}
	return out, nil
}

var (
	hostRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)
	portRE = regexp.MustCompile(`^[1-9][0-9]{0,4}$`)
)

// splitPort splits host[:port] (an IPv6 literal in brackets), lower-cases
// the host and drops its trailing dot; def is the port when none is given.
func splitPort(h, def string) (host, port string) {
	host, port = h, def
	if hh, pp, err := net.SplitHostPort(h); err == nil {
		host, port = hh, pp
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), "."), port
}

// bound reports whether hostport (canonical host:port) is one of hosts;
// anyPort ignores the ports.
func bound(hosts []string, hostport string, anyPort bool) bool {
	host, port := splitPort(hostport, "443")
	for _, hp := range hosts {
		h, p := splitPort(hp, "443")
		if p != port && !anyPort {
			continue
		}
		if suf, ok := strings.CutPrefix(h, "*"); ok {
			if strings.HasSuffix(host, suf) && len(host) > len(suf) {
				return true
			}
		} else if h == host {
			return true
		}
	}
	return false
}

// Placeholder returns the placeholder of the credential name, and false
// when the Set has none of that name.
func (s *Set) Placeholder(name string) (string, bool) {
	for _, it := range s.items {
		if it.name == name {
			return it.placeholder, true
		}
	}
	return "", false
}

// Names returns the credentials' names in the order given to New.
func (s *Set) Names() []string {
	out := make([]string, len(s.items))
	for i, it := range s.items {
		out[i] = it.name
	}
	return out
}

// Hosts returns every host:port some credential is bound to, each once:
// the targets whose TLS the proxy must terminate.
func (s *Set) Hosts() []string {
	var out []string
	for _, it := range s.items {
		for _, h := range it.hosts {
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}

// Redact returns text with every real value, and its base64 and
// percent-encoded spellings, replaced by [secret NAME]. Use it on any
// text built from what a request or an upstream carried before it is
// logged, audited or returned.
func (s *Set) Redact(text string) string {
	if s == nil {
		return text
	}
	for _, it := range s.items {
		for _, form := range spellings(it.real) {
			text = strings.ReplaceAll(text, form, "[secret "+it.name+"]")
		}
	}
	return text
}
