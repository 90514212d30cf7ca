package secret

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
)

const (
	ghReal  = "ghp_R3alT0kenValue0123456789abcdefABCD"
	antReal = "sk-ant-api03-Real-Key_value-0123456789abcdefghijklmnop"
	npmReal = "npm_RealNpmToken0123456789abcdefghijkl"
)

func newSet(t *testing.T, specs ...Spec) *Set {
	t.Helper()
	s, err := New(specs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ph(t *testing.T, s *Set, name string) string {
	t.Helper()
	p, ok := s.Placeholder(name)
	if !ok {
		t.Fatalf("no placeholder for %s", name)
	}
	return p
}

func TestPlaceholderShape(t *testing.T) {
	for _, real := range []string{ghReal, antReal, npmReal, "AKIAIOSFODNN7EXAMPLE", "glpat-abcdefghij0123456789", "plainlowercasetokenvalue", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"} {
		s := newSet(t, Spec{Name: "T", Value: real, Hosts: []string{"example.com"}})
		p := ph(t, s, "T")
		if p == real {
			t.Fatalf("placeholder equals the real value")
		}
		if len(p) != len(real) {
			t.Fatalf("%q: placeholder length %d, want %d", real, len(p), len(real))
		}
		for _, pre := range prefixes {
			if strings.HasPrefix(real, pre) {
				if !strings.HasPrefix(p, pre) {
					t.Fatalf("%q: placeholder %q lost prefix %q", real, p, pre)
				}
				break
			}
		}
		for i := range real {
			a, b := rune(real[i]), rune(p[i])
			same := unicode.IsLower(a) == unicode.IsLower(b) && unicode.IsUpper(a) == unicode.IsUpper(b) && unicode.IsDigit(a) == unicode.IsDigit(b)
			if !same || (!unicode.IsLetter(a) && !unicode.IsDigit(a) && a != b) {
				t.Fatalf("%q: placeholder %q differs in class at %d", real, p, i)
			}
		}
		// Two draws differ: the placeholder is random, not derived.
		if p2 := ph(t, newSet(t, Spec{Name: "T", Value: real}), "T"); p2 == p {
			t.Fatalf("two placeholders of %q are equal", real)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		specs []Spec
	}{
		{"bad name", []Spec{{Name: "1X", Value: ghReal}}},
		{"twice", []Spec{{Name: "X", Value: ghReal}, {Name: "X", Value: npmReal}}},
		{"empty", []Spec{{Name: "X", Value: ""}}},
		{"newline", []Spec{{Name: "X", Value: ghReal + "\n"}}},
		{"short", []Spec{{Name: "X", Value: "ghp_abc123"}}},
		{"bad host", []Spec{{Name: "X", Value: ghReal, Hosts: []string{"a b"}}}},
		{"inner wildcard", []Spec{{Name: "X", Value: ghReal, Hosts: []string{"a.*.com"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.specs)
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("New: %v, want ErrSpec", err)
			}
			for _, sp := range tc.specs {
				if len(sp.Value) > 3 && strings.Contains(err.Error(), strings.TrimSpace(sp.Value)) {
					t.Fatalf("error holds the value: %v", err)
				}
			}
		})
	}
}

type reqCase struct {
	name    string
	host    string
	tls     bool
	build   func(p string) *http.Request
	swapped bool   // the real value reaches the request
	reason  string // refusal code, "" when forwarded
}

func TestApply(t *testing.T) {
	s := newSet(t,
		Spec{Name: "GH", Value: ghReal, Hosts: []string{"api.github.com", "*.githubusercontent.com"}},
		Spec{Name: "NPM", Value: npmReal, Hosts: []string{"registry.npmjs.org"}, InBody: true},
	)
	gh, npm := ph(t, s, "GH"), ph(t, s, "NPM")
	get := func(url string, hdr ...string) func(string) *http.Request {
		return func(p string) *http.Request {
			r := httptest.NewRequest("GET", strings.ReplaceAll(url, "PH", p), nil)
			for i := 0; i+1 < len(hdr); i += 2 {
				r.Header.Set(hdr[i], strings.ReplaceAll(hdr[i+1], "PH", p))
			}
			return r
		}
	}
	basicOf := func(u, p string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)) }
	cases := []reqCase{
		{"bearer to its host over TLS", "api.github.com:443", true, get("https://api.github.com/user", "Authorization", "Bearer PH"), true, ""},
		{"token scheme", "api.github.com", true, get("https://api.github.com/user", "Authorization", "token PH"), true, ""},
		{"custom header", "api.github.com", true, get("https://api.github.com/user", "X-Api-Token", "PH"), true, ""},
		{"query", "api.github.com", true, get("https://api.github.com/user?access_token=PH&x=1"), true, ""},
		{"wildcard host", "raw.githubusercontent.com", true, get("https://raw.githubusercontent.com/x", "Authorization", "Bearer PH"), true, ""},
		{"wildcard is not the apex", "githubusercontent.com", true, get("https://githubusercontent.com/x", "Authorization", "Bearer PH"), false, ReasonElsewhere},
		{"other host", "evil.example", true, get("https://evil.example/", "Authorization", "Bearer PH"), false, ReasonElsewhere},
		{"other host, in query", "evil.example", true, get("https://evil.example/?t=PH"), false, ReasonElsewhere},
		{"other host, in path", "evil.example", true, get("https://evil.example/PH"), false, ReasonElsewhere},
		{"other host, custom header", "evil.example", true, get("https://evil.example/", "X-Leak", "zzPHzz"), false, ReasonElsewhere},
		{"plaintext to its host", "api.github.com:80", false, get("http://api.github.com/user", "Authorization", "Bearer PH"), false, ReasonPlaintext},
		{"Host header names another host", "api.github.com", true, func(p string) *http.Request {
			r := get("https://api.github.com/user", "Authorization", "Bearer PH")(p)
			r.Host = "evil.example"
			return r
		}, false, ReasonElsewhere},
		{"no placeholder", "evil.example", true, get("https://evil.example/", "Authorization", "Bearer something"), false, ""},
		{"other port of its host", "api.github.com:8443", true, get("https://api.github.com:8443/", "Authorization", "Bearer PH"), false, ReasonElsewhere},
		{"suffix trick", "api.github.com.evil.example", true, get("https://api.github.com.evil.example/", "Authorization", "Bearer PH"), false, ReasonElsewhere},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.build(gh)
			before := dump(r)
			d := s.Apply(r, tc.host, tc.tls)
			checkDecision(t, s, d, r, before, tc, ghReal)
		})
	}
	t.Run("basic", func(t *testing.T) {
		r := httptest.NewRequest("GET", "https://api.github.com/x", nil)
		r.Header.Set("Authorization", basicOf("x-access-token", gh))
		d := s.Apply(r, "api.github.com", true)
		if d.Refused != nil || r.Header.Get("Authorization") != basicOf("x-access-token", ghReal) {
			t.Fatalf("Basic not swapped: %+v %q", d, r.Header.Get("Authorization"))
		}
		r = httptest.NewRequest("GET", "https://evil.example/x", nil)
		r.Header.Set("Authorization", basicOf("u", gh))
		if d := s.Apply(r, "evil.example", true); d.Refused == nil || d.Refused.Name != "GH" {
			t.Fatalf("Basic to another host not refused: %+v", d)
		}
	})
	t.Run("body only when bound InBody", func(t *testing.T) {
		body := `{"token":"` + npm + `","gh":"` + gh + `"}`
		r := httptest.NewRequest("PUT", "https://registry.npmjs.org/pkg", strings.NewReader(body))
		d := s.Apply(r, "registry.npmjs.org", true)
		got, _ := io.ReadAll(r.Body)
		if d.Refused != nil || !bytes.Contains(got, []byte(npmReal)) || bytes.Contains(got, []byte(npm)) {
			t.Fatalf("npm body not swapped: %+v %s", d, got)
		}
		if bytes.Contains(got, []byte(ghReal)) {
			t.Fatalf("GH swapped in a body it was not bound to")
		}
		// The same body to another host is refused for NPM.
		r = httptest.NewRequest("PUT", "https://evil.example/pkg", strings.NewReader(body))
		if d := s.Apply(r, "evil.example", true); d.Refused == nil || d.Refused.Name != "NPM" {
			t.Fatalf("body placeholder to another host: %+v", d)
		}
		// Control: without InBody the body is not swapped.
		s2 := newSet(t, Spec{Name: "NPM", Value: npmReal, Hosts: []string{"registry.npmjs.org"}})
		np2 := ph(t, s2, "NPM")
		r = httptest.NewRequest("PUT", "https://registry.npmjs.org/pkg", strings.NewReader(np2))
		s2.Apply(r, "registry.npmjs.org", true)
		if got, _ := io.ReadAll(r.Body); string(got) != np2 {
			t.Fatalf("body swapped without InBody: %q", got)
		}
	})
	t.Run("body over MaxBody refused", func(t *testing.T) {
		r := httptest.NewRequest("PUT", "https://registry.npmjs.org/pkg", io.MultiReader(strings.NewReader(npm), bytes.NewReader(make([]byte, MaxBody+1))))
		d := s.Apply(r, "registry.npmjs.org", true)
		if d.Refused == nil || d.Refused.Reason != ReasonBodyTooLarge || d.Refused.Status() != 413 {
			t.Fatalf("big body: %+v", d)
		}
		// To a host not bound in bodies, a big body goes on whole.
		r = httptest.NewRequest("PUT", "https://other.example/pkg", bytes.NewReader(make([]byte, MaxBody+10)))
		if d := s.Apply(r, "other.example", true); d.Refused != nil {
			t.Fatalf("big body elsewhere refused: %+v", d)
		}
		if n, _ := io.Copy(io.Discard, r.Body); n != MaxBody+10 {
			t.Fatalf("body forwarded with %d bytes, want %d", n, MaxBody+10)
		}
	})
}

// dump is what a request would put on the wire, near enough.
func dump(r *http.Request) string {
	var b strings.Builder
	b.WriteString(r.Method + " " + r.URL.String() + " " + r.Host + "\n")
	r.Header.Write(&b)
	return b.String()
}

func checkDecision(t *testing.T, s *Set, d Decision, r *http.Request, before string, tc reqCase, real string) {
	t.Helper()
	after := dump(r)
	switch {
	case tc.reason != "":
		if d.Refused == nil || d.Refused.Reason != tc.reason {
			t.Fatalf("decision %+v, want refusal %s", d, tc.reason)
		}
		if after != before {
			t.Fatalf("a refused request was changed:\n%s\nto\n%s", before, after)
		}
		msg := d.Refused.Error()
		if strings.Contains(msg, real) || !strings.Contains(msg, d.Refused.Name) || !strings.Contains(msg, "fix:") {
			t.Fatalf("refusal message %q", msg)
		}
	case tc.swapped:
		if d.Refused != nil || len(d.Swapped) != 1 || !strings.Contains(after, strings.ReplaceAll(real, "_", "_")) {
			t.Fatalf("decision %+v, request %s: want the real value in", d, after)
		}
	default:
		if d.Refused != nil || len(d.Swapped) != 0 || after != before {
			t.Fatalf("decision %+v: want nothing done", d)
		}
	}
	if strings.Contains(s.Redact(after), real) {
		t.Fatalf("Redact left the real value in %s", s.Redact(after))
	}
}

func TestScrubResponse(t *testing.T) {
	s := newSet(t, Spec{Name: "GH", Value: ghReal, Hosts: []string{"api.github.com"}})
	gh := ph(t, s, "GH")
	body := "echo: Bearer " + ghReal + " and again " + ghReal
	// Delivered one byte at a time, so every split of the value is seen.
	resp := &http.Response{Header: http.Header{"X-Echo": {ghReal}}, Body: io.NopCloser(&oneByte{r: strings.NewReader(body)})}
	if !s.ScrubResponse(resp) {
		t.Fatal("uncompressed body not scrubbed")
	}
	got, _ := io.ReadAll(resp.Body)
	want := strings.ReplaceAll(body, ghReal, gh)
	if string(got) != want || resp.Header.Get("X-Echo") != gh {
		t.Fatalf("scrubbed %q, header %q; want %q", got, resp.Header.Get("X-Echo"), want)
	}
	// A body with no prefix of the value is not held back.
	r := &scrubReader{s: s, r: io.NopCloser(strings.NewReader("data: {}\n\n"))}
	p := make([]byte, 64)
	if n, _ := r.Read(p); string(p[:n]) != "data: {}\n\n" {
		t.Fatalf("first read %q", p[:n])
	}
	if s.ScrubResponse(&http.Response{Header: http.Header{"Content-Encoding": {"gzip"}}, Body: http.NoBody}) {
		t.Fatal("a gzip body reported scrubbed")
	}
}

type oneByte struct{ r io.Reader }

func (o *oneByte) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}
