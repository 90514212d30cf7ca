package mcp

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestParseWHATWG compares the relay's URI parser with Node's WHATWG URL
// parser (the TypeScript SDK's resource lookup), on the golden table
// testdata/whatwg-urls.json that testdata/whatwg-urls.mjs generates: an
// input the relay accepts serialises exactly as Node's href, an input
// Node refuses the relay refuses too, and the relay refuses more only
// where strictRefusals says so.
func TestParseWHATWG(t *testing.T) {
	b, err := os.ReadFile("testdata/whatwg-urls.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Rows []struct {
			Input string `json:"input"`
			Href  string `json:"href"`
			Error bool   `json:"error"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	strictRefusals := map[string]bool{
		"http://0x7f.1/": true, "http://ex.com/a\\b": true, "http:ex.com/a": true, "http:///ex.com/a": true,
		"file:///C:/../x": true, "demo://h/%zz": true, "demo://[::1]/": true, "demo://hé/": true,
		"http://ex.com./": true, "demo://h/a{b}": true, "demo://h/../a": true, "demo://h/a/../../..": true,
		"http://u:p:q@h/": true,
	}
	seen := 0
	for _, row := range golden.Rows {
		u, err := parseWHATWG(row.Input)
		switch {
		case err != nil && !errors.Is(err, ErrURI):
			t.Errorf("%q: error %v does not wrap ErrURI", row.Input, err)
		case err != nil && !row.Error && !strictRefusals[row.Input]:
			t.Errorf("%q: refused (%v), Node reads it as %q", row.Input, err, row.Href)
		case err == nil && row.Error:
			t.Errorf("%q: accepted as %q, Node refuses it", row.Input, u.String())
		case err == nil && strictRefusals[row.Input]:
			t.Errorf("%q: accepted as %q, though listed as refused", row.Input, u.String())
		case err == nil && u.String() != row.Href:
			t.Errorf("%q: %q, Node: %q", row.Input, u.String(), row.Href)
		case err == nil:
			seen++
		}
	}
	if seen < 40 {
		t.Errorf("only %d rows compared", seen)
	}
}

func TestCanonicalURI(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"demo://resource/static/document/architecture.md", "demo://resource/static/document/architecture.md"},
		{"DEMO://RESOURCE/static/x/../document/./architecture.md", "demo://resource/static/document/architecture.md"},
		{"demo://resource/static/document/%61rchitecture%2Emd", "demo://resource/static/document/architecture.md"},
		{"demo://resource/static/document/%2e%2E/document/architecture.md", "demo://resource/static/document/architecture.md"},
		{" demo://resource/static/docu\tment/architecture.md\n", "demo://resource/static/document/architecture.md"},
		{"demo://h/a%2fb%7e%c3%a9", "demo://h/a%2Fb~%C3%A9"},
		{"demo://h/é", "demo://h/%C3%A9"},
		{"HTTPS://Example.COM:443", "https://example.com/"},
		{"http://example.com:0080/a?Q=%41#%7E", "http://example.com/a?Q=A#~"},
		{"demo://u:@h/", "demo://u@h/"},
		{"file://LOCALHOST/etc/x", "file:///etc/x"},
		{"urn:Isbn:%30", "urn:Isbn:0"},
	} {
		got, err := CanonicalURI(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("CanonicalURI(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			continue
		}
		// Canonical means a fixed point.
		if again, err := CanonicalURI(got); err != nil || again != got {
			t.Errorf("CanonicalURI(%q) = %q, %v: not a fixed point", got, again, err)
		}
	}
}

func TestCheckURI(t *testing.T) {
	deny := Rules{DenyResources: []string{"DEMO://resource/static/document/architecture.md", "file:///secret/*"}}.canonicalPatterns()
	allow := Rules{AllowResources: []string{"demo://resource/dynamic/*", "file:///pub/*"}}.canonicalPatterns()
	open := Rules{}
	for _, tc := range []struct {
		r     Rules
		uri   string
		ok    bool
		canon string
	}{
		{deny, "demo://resource/static/document/architecture.md", false, "demo://resource/static/document/architecture.md"},
		{deny, "DEMO://resource/static/document/architecture.md", false, "demo://resource/static/document/architecture.md"},
		{deny, "demo://resource/static/x/../document/architecture.md", false, "demo://resource/static/document/architecture.md"},
		{deny, "demo://resource/static/document/%61rchitecture.md", false, "demo://resource/static/document/architecture.md"},
		{deny, "demo://resource/static/document/features.md", true, "demo://resource/static/document/features.md"},
		// A server that decodes %2F before resolving the path reads /secret/key.
		{deny, "file:///pub/..%2Fsecret/key", false, "file:///pub/..%2Fsecret/key"},
		{deny, "file:///pub/a%2Fb", true, "file:///pub/a%2Fb"},
		{deny, "demo://h/a\\..\\b", false, ""},
		{allow, "demo://resource/dynamic/text/1", true, "demo://resource/dynamic/text/1"},
		{allow, "demo://resource/dynamic/../static/document/architecture.md", false, "demo://resource/static/document/architecture.md"},
		{allow, "demo://resource/dynamic/%2e%2e/static/document/architecture.md", false, "demo://resource/static/document/architecture.md"},
		{allow, "file:///pub/..%2F..%2Fetc/passwd", false, "file:///pub/..%2F..%2Fetc/passwd"},
		{allow, "file:///pub/a%2Fb", true, "file:///pub/a%2Fb"},
		{allow, "demo://resource/dynamic/text/%zz", false, ""},
		{open, "demo://h/%zz", true, ""},
		{open, "DEMO://h/x/../y", true, "demo://h/y"},
	} {
		canon, ok, rule := tc.r.checkURI(tc.uri)
		if ok != tc.ok || canon != tc.canon || ok != (rule == "") {
			t.Errorf("%+v checkURI(%q) = %q, %v, %q; want %q, %v", tc.r, tc.uri, canon, ok, rule, tc.canon, tc.ok)
		}
	}
}

func TestCanonicalPattern(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"DEMO://Resource/static/*", "demo://resource/static/*"},
		{"demo://h/a/../b/*", "demo://h/b/*"},
		{"demo://h/a/%2e%2e/b?", "demo://h/b?"},
		{"HTTP://Example.com:80", "http://example.com/"},
		{"http://*", "http://*"},
		{"http://example.com:80/*", "http://example.com/*"},
		{"*secret*", "*secret*"},
		{"*%2fsecret", "*%2Fsecret"},
		{"demo://h/%61*", "demo://h/a*"},
	} {
		if got := CanonicalPattern(tc.in); got != tc.want {
			t.Errorf("CanonicalPattern(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRelayForwardsCanonicalURI: the server reads the URI the relay
// judged (its canonical form), in the relay's own encoding whatever order
// the client wrote the members in;
// a URI that differs from a denied one only in spelling is refused and
// never reaches the server (marker), and the audit records the canonical
// form and what was sent. Control: a visible URI reaches the server.
func TestRelayForwardsCanonicalURI(t *testing.T) {
	s := newRaw(t, Rules{DenyResources: []string{"demo://h/secret"}})
	for _, l := range []struct{ sent, want string }{
		{`{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"DEMO://H/x/../%70ub"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"demo://h/pub"}}`},
		{`{"params":{"uri":"demo://h/./pub/%c3%a9"},"method":"resources/read","jsonrpc":"2.0","id":"b"}`,
			`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"demo://h/pub/%C3%A9"}}`},
	} {
		s.client(l.sent)
		if got := s.atServer(); got != l.want {
			t.Errorf("server got %s, want %s", got, l.want)
		}
		s.answer(`{"contents":[]}`)
		if r := reply(t, s.atClient()); r.Error != nil {
			t.Errorf("%s: %s", l.sent, r.Error.Message)
		}
	}
	for _, uri := range []string{"DEMO://h/secret", "demo://h/x/../secret", "demo://h/%73ecret", " demo://h/sec\tret", "demo://h/%2e%2e/secret"} {
		s.client(`{"jsonrpc":"2.0","id":"d","method":"resources/read","params":{"uri":` + strconvQuote(uri) + `}}`)
		if r := reply(t, s.atClient()); r.Error == nil || r.Error.Code != codeRefused {
			t.Errorf("%q: not refused: %+v", uri, r)
		}
		s.marker(t)
	}
	var sawSent bool
	for _, rec := range s.audit.records(t) {
		if rec.URISent == "demo://h/x/../secret" && rec.URI == "demo://h/secret" && rec.Outcome == outcomeRefused {
			sawSent = true
		}
	}
	if !sawSent {
		t.Errorf("no audit record with the canonical URI and the one sent")
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestAuditURIRedactedAlways: without AuditArgs, a resources/read whose
// URI holds a user, a password and a query token reaches the server whole
// (the control: the secrets were in the request), while the audit records
// the URI with them redacted, and names no secret anywhere.
func TestAuditURIRedactedAlways(t *testing.T) {
	s := newRaw(t, Rules{DenyResources: []string{"demo://*@h/denied?*"}})
	const uri = "demo://ada:hunter2@h/x?key=fakevalue&page=2"
	s.client(`{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"` + uri + `"}}`)
	if got := s.atServer(); !strings.Contains(got, uri) {
		t.Fatalf("server got %s, want the URI whole (untested)", got)
	}
	s.answer(`{"contents":[]}`)
	s.atClient()
	s.client(`{"jsonrpc":"2.0","id":"b","method":"resources/read","params":{"uri":"DEMO://ada:hunter2@h/denied?key=fakevalue"}}`)
	if r := reply(t, s.atClient()); r.Error == nil {
		t.Fatalf("denied URI not refused")
	}
	recs := s.audit.records(t)
	if len(recs) != 2 || recs[0].URI != "demo://[redacted]@h/x?key=[redacted]&page=[redacted]" ||
		recs[1].URI != "demo://[redacted]@h/denied?key=[redacted]" || recs[1].URISent != "DEMO://[redacted]@h/denied?key=[redacted]" {
		t.Errorf("records %+v", recs)
	}
	if all := s.audit.b.String(); strings.Contains(all, "hunter2") || strings.Contains(all, "fakevalue") {
		t.Errorf("a secret in the audit:\n%s", all)
	}
}

// FuzzCanonicalURI: a canonical form is its own canonical form, and the
// WHATWG stage (what the TypeScript SDK looks up, per TestParseWHATWG)
// serialises it unchanged, so a server reads exactly what was judged.
func FuzzCanonicalURI(f *testing.F) {
	for _, s := range []string{"demo://h/a/../b", "HTTP://Ex.com:80/%7e?q=%41#f", "file:///etc/%2e%2E/x", "urn:x:y", "demo://u:p@h:08/é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := CanonicalURI(s)
		if err != nil {
			return
		}
		if again, err := CanonicalURI(c); err != nil || again != c {
			t.Fatalf("CanonicalURI(%q) = %q; of that: %q, %v", s, c, again, err)
		}
		if u, err := parseWHATWG(c); err != nil || u.String() != c {
			t.Fatalf("the WHATWG stage reads canonical %q as %q, %v", c, u.String(), err)
		}
	})
}

// TestURIRefusalKeepsNoSecret: a refusal's message and audit record name
// neither a URI's password nor, when it has no '@' and reads as
// host:port, the "port" that is one.
func TestURIRefusalKeepsNoSecret(t *testing.T) {
	s := newRaw(t, Rules{AllowResources: []string{"demo://h/pub/*"}})
	for _, uri := range []string{"demo://ada:hunter2@h/x?key=fakevalue", "demo://ada:hunter2/x"} {
		s.client(`{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"` + uri + `"}}`)
		line := s.atClient()
		if r := reply(t, line); r.Error == nil {
			t.Fatalf("%s not refused: %s", uri, line)
		}
		if strings.Contains(line, "hunter2") || strings.Contains(line, "fakevalue") {
			t.Errorf("a secret in the refusal: %s", line)
		}
	}
	if all := s.audit.b.String(); strings.Contains(all, "hunter2") || strings.Contains(all, "fakevalue") || !strings.Contains(all, "refused") {
		t.Errorf("audit:\n%s", all)
	}
}
