package secret

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// FuzzNoLeak feeds Apply arbitrary requests (the placeholder and the real
// value spliced in at fuzzed places) and checks that nothing the package
// returns or formats holds the real value: the decision, the refusal's
// message, its JSON, and Redact of the request as forwarded. And that a
// request that is not over TLS to a bound host never gets the real value.
func FuzzNoLeak(f *testing.F) {
	f.Add("GET", "/x?y=PH", "Authorization", "Bearer PH", "body PH", "api.github.com", true)
	f.Add("POST", "/PH", "X-T", "REAL", "REAL", "evil.example", false)
	f.Add("PUT", "/", "Authorization", "Basic eC1hY2Nlc3MtdG9rZW46UEg=", "", "api.github.com:443", false)
	f.Fuzz(func(t *testing.T, method, path, hk, hv, body, host string, overTLS bool) {
		s, err := New([]Spec{{Name: "GH", Value: ghReal, Hosts: []string{"api.github.com"}, InBody: true}})
		if err != nil {
			t.Fatal(err)
		}
		gh, _ := s.Placeholder("GH")
		sub := func(v string) string { return strings.ReplaceAll(strings.ReplaceAll(v, "PH", gh), "REAL", "") }
		r, err := http.NewRequest("GET", "https://x.invalid/", strings.NewReader(sub(body)))
		if err != nil {
			t.Fatal(err)
		}
		r.Method = method
		r.URL.Path, r.URL.RawQuery, _ = strings.Cut(sub(path), "?")
		r.Header[hk] = []string{sub(hv)}
		r.Host = host
		d := s.Apply(r, host, overTLS)
		out := fmt.Sprintf("%+v %v", d, d.Swapped)
		if d.Refused != nil {
			out += d.Refused.Error()
			b, _ := json.Marshal(d.Refused)
			out += string(b)
		}
		var wire strings.Builder
		r.Write(&wire)
		if strings.Contains(out, ghReal) || strings.Contains(s.Redact(wire.String()), ghReal) {
			t.Fatalf("real value in an output: %s", out)
		}
		if (!overTLS || !bound([]string{"api.github.com:443"}, host, false) || d.Refused != nil) && strings.Contains(wire.String(), ghReal) {
			t.Fatalf("real value put in a request that is refused, plaintext or to %q", host)
		}
	})
}
