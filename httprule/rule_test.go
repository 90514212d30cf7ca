package httprule

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/allowlist"
)

func target(t *testing.T, hp string) allowlist.Target {
	t.Helper()
	tg, err := allowlist.ParseTarget(hp, 443)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestParseRefuses(t *testing.T) {
	for _, raw := range []string{
		"", "GET", "GET ", "G@T api.github.com/", "GET *.github.com/", "GET api.github.com/a b",
		"GET api.github.com/%2e%2e", "GET api.github.com/a/../b", "GET api.github.com/a**",
		"GET api.github.com:0/", "GET api.github.com:99999/", "GET /path", "GET api.github.com/a?b",
		"GET api.github.com/a\x00",
	} {
		if _, err := Parse(raw); !errors.Is(err, ErrInvalidRule) {
			t.Errorf("Parse(%q) = %v, want ErrInvalidRule", raw, err)
		}
	}
}

func TestMatch(t *testing.T) {
	cases := []struct {
		rule, method, host, path string
		want                     bool
	}{
		{"GET,HEAD api.github.com/repos/**", "GET", "api.github.com", "/repos/o/r", true},
		{"GET,HEAD api.github.com/repos/**", "HEAD", "api.github.com", "/repos", true},
		{"get api.github.com/repos/**", "GET", "api.github.com", "/repos/o", true},
		{"GET,HEAD api.github.com/repos/**", "POST", "api.github.com", "/repos/o/r", false},
		{"GET,HEAD api.github.com/repos/**", "GET", "api.github.com", "/admin", false},
		{"GET,HEAD api.github.com/repos/**", "GET", "api.github.com", "/reposx", false},
		{"GET api.github.com/repos/**", "GET", "api.github.com:8443", "/repos/o", false},
		{"GET api.github.com:8443/repos/**", "GET", "api.github.com:8443", "/repos/o", true},
		{"GET API.GitHub.com./repos/**", "GET", "api.github.com", "/repos/o", true},
		{"GET api.github.com/repos/**", "GET", "uploads.github.com", "/repos/o", false},
		{"* api.github.com/repos/*", "DELETE", "api.github.com", "/repos/o", true},
		{"* api.github.com/repos/*", "DELETE", "api.github.com", "/repos/o/r", false},
		{"* api.github.com/repos/*", "DELETE", "api.github.com", "/repos", false},
		{"GET api.github.com/repos/*/*/issues", "GET", "api.github.com", "/repos/o/r/issues", true},
		{"GET api.github.com/repos/*/*/issues", "GET", "api.github.com", "/repos/o/issues", false},
		{"GET api.github.com/**/issues", "GET", "api.github.com", "/repos/o/r/issues", true},
		{"GET api.github.com/**/issues", "GET", "api.github.com", "/issues", true},
		{"GET api.github.com/**/issues", "GET", "api.github.com", "/repos/issues/x", false},
		{"GET api.github.com/files/*.json", "GET", "api.github.com", "/files/a.json", true},
		{"GET api.github.com/files/*.json", "GET", "api.github.com", "/files/a.jsonx", false},
		{"GET api.github.com/files/a*b*c", "GET", "api.github.com", "/files/abc", true},
		{"GET api.github.com/files/a*b*c", "GET", "api.github.com", "/files/acb", false},
		{"GET api.github.com", "GET", "api.github.com", "/anything/at/all", true},
		{"GET api.github.com/", "GET", "api.github.com", "/", true},
		{"GET api.github.com/", "GET", "api.github.com", "/a", false},
		{"GET 198.18.0.2:8443/x", "GET", "198.18.0.2:8443", "/x", true},
		{"GET [2001:db8::1]/x", "GET", "[2001:db8::1]:443", "/x", true},
	}
	for _, c := range cases {
		r, err := Parse(c.rule)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.rule, err)
		}
		if got := r.Match(c.method, target(t, c.host), c.path); got != c.want {
			t.Errorf("%q.Match(%s %s%s) = %v, want %v", c.rule, c.method, c.host, c.path, got, c.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	cases := []struct{ in, want string }{
		{"/repos/o/r", "/repos/o/r"},
		{"//admin", "/admin"},
		{"/repos//o///r/", "/repos/o/r/"},
		{"/repos/../admin", "/admin"},
		{"/repos/%2e%2e/admin", "/admin"},
		{"/repos/%2E%2E/admin", "/admin"},
		{"/repos/./o", "/repos/o"},
		{"/../../admin", "/admin"},
		{"/repos/o/..", "/repos/"},
		{"/a%20b", "/a b"},
		{"/%72epos", "/repos"},
		{"/", "/"},
		{"/a/%25/b", "/a/%/b"},
	}
	for _, c := range cases {
		got, err := Normalize(c.in)
		if err != nil || got != c.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"repos", "", "*", "/repos%2Fadmin", "/repos%2fadmin", "/a\\b", "/a%5cb", "/a%00b", "/a%zz", "/a%0ab"} {
		if got, err := Normalize(in); !errors.Is(err, ErrAmbiguousPath) {
			t.Errorf("Normalize(%q) = %q, %v; want ErrAmbiguousPath", in, got, err)
		}
	}
}

// TestRuleRefusesTricks: each trick reaches a path the rule does not
// allow once normalised, although its raw spelling starts with the
// allowed prefix; the control is a naive prefix match on the raw path,
// which would allow it.
func TestRuleRefusesTricks(t *testing.T) {
	r, _ := Parse("GET api.github.com/repos/**")
	tg := target(t, "api.github.com")
	for _, raw := range []string{"/repos/%2e%2e/admin", "/repos/../admin", "/repos/./../admin", "/repos/%2E%2e/%2e%2E/admin"} {
		if !strings.HasPrefix(raw, "/repos/") {
			t.Fatalf("control: %q does not start with the allowed prefix", raw)
		}
		p, err := Normalize(raw)
		if err != nil {
			t.Fatalf("Normalize(%q): %v", raw, err)
		}
		if r.Match("GET", tg, p) {
			t.Errorf("%q (canonical %q) matched %s", raw, p, r)
		}
	}
	// "//admin" would be "/admin" to most servers: not under /repos.
	if p, _ := Normalize("//admin"); r.Match("GET", tg, p) {
		t.Errorf("//admin matched")
	}
}

func TestSuggest(t *testing.T) {
	if got, want := Suggest("POST", target(t, "api.github.com"), "/repos/o/r/issues"), `--allow-http 'POST api.github.com/repos/o/r/issues'`; got != want {
		t.Errorf("Suggest = %s, want %s", got, want)
	}
	if got, want := Suggest("GET", target(t, "198.18.0.2:8443"), "/it's"), `--allow-http 'GET 198.18.0.2:8443/it'\''s'`; got != want {
		t.Errorf("Suggest = %s, want %s", got, want)
	}
	// The suggestion parses, and allows what it was made for.
	r, err := Parse("POST api.github.com:8443/repos/o/r")
	if err != nil || !r.Match("POST", target(t, "api.github.com:8443"), "/repos/o/r") {
		t.Fatalf("suggested rule: %v", err)
	}
}

func TestSet(t *testing.T) {
	s, err := ParseSet([]string{"GET a.example/x/**", "POST a.example/y", "GET b.example:8443/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Hosts(); len(got) != 2 {
		t.Fatalf("Hosts = %v", got)
	}
	if !s.Covers(target(t, "a.example")) || s.Covers(target(t, "b.example")) || !s.Covers(target(t, "b.example:8443")) {
		t.Errorf("Covers wrong")
	}
	if r, ok := s.Judge("POST", target(t, "a.example"), "/y"); !ok || r.String() != "POST a.example/y" {
		t.Errorf("Judge = %v, %v", r, ok)
	}
	if _, ok := s.Judge("POST", target(t, "a.example"), "/x/1"); ok {
		t.Errorf("POST /x/1 allowed")
	}
	if got := AllowEntry(target(t, "[2001:db8::1]:443")); got != "[2001:db8::1]:443" {
		t.Errorf("AllowEntry = %q", got)
	}
}

// FuzzNormalize: the canonical form is a fixed point once escaped for the
// wire, never holds a dot segment or an empty segment, and a path that is
// refused stays refused whatever follows it.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"/repos/%2e%2e/admin", "//admin", "/a/./b/../c/", "/%2F", "/a%zz", "/a b", "/%25%32%66"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := Normalize(in)
		if err != nil {
			return
		}
		wire := (&url.URL{Path: p}).EscapedPath()
		again, err := Normalize(wire)
		if err != nil || again != p {
			t.Fatalf("Normalize(%q) = %q, escaped %q, again %q, %v", in, p, wire, again, err)
		}
		for _, seg := range strings.Split(strings.TrimSuffix(p[1:], "/"), "/") {
			if (seg == "" && p != "/") || seg == "." || seg == ".." {
				t.Fatalf("Normalize(%q) = %q has segment %q", in, p, seg)
			}
		}
	})
}

// FuzzParse: Parse never panics, and a rule it accepts allows the path
// its own glob spells when the wildcards are filled in.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"GET,HEAD api.github.com/repos/**", "* h/*/x*y", "POST [::1]:8/a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r, err := Parse(raw)
		if err != nil {
			return
		}
		var segs []string
		for _, g := range r.glob {
			segs = append(segs, strings.ReplaceAll(g, "*", "x"))
		}
		method := "GET"
		if r.methods != nil {
			method = r.methods[0]
		}
		if !r.Match(method, r.host, "/"+strings.Join(segs, "/")) {
			t.Fatalf("%q does not match its own path /%s", raw, strings.Join(segs, "/"))
		}
	})
}
