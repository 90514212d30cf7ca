package mcp

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		n              int
	}{
		{"nothing secret", `{"path":"/home/me/project/src/main.go","count":3,"ok":true}`, `{"count":3,"ok":true,"path":"/home/me/project/src/main.go"}`, 0},
		{"password key", `{"user":"ada","password":"hunter2"}`, `{"password":"[redacted]","user":"ada"}`, 1},
		{"key spellings", `{"API-Key":"x","access_token":"y","client.secret":"z","Authorization":"q","ssh_key":{"a":1},"pin":1234,"pwd":"p"}`,
			`{"API-Key":"[redacted]","Authorization":"[redacted]","access_token":"[redacted]","client.secret":"[redacted]","pin":"[redacted]","pwd":"[redacted]","ssh_key":"[redacted]"}`, 7},
		{"null under a secret key stays", `{"token":null}`, `{"token":null}`, 0},
		{"nested", `{"a":[{"b":{"session_id":"s"}}]}`, `{"a":[{"b":{"session_id":"[redacted]"}}]}`, 1},
		{"github token", `{"q":"ghp_` + strings.Repeat("a", 36) + `"}`, `{"q":"[redacted]"}`, 1},
		{"fine-grained pat", `{"q":"github_pat_11ABCDEFG0abcdefghijklmnop"}`, `{"q":"[redacted]"}`, 1},
		{"openai/anthropic key", `["sk-ant-api03-abcdefghijklmnop"]`, `["[redacted]"]`, 1},
		{"slack", `{"q":"xoxb-1234-5678-abcdefgh"}`, `{"q":"[redacted]"}`, 1},
		{"aws key id", `{"q":"AKIAIOSFODNN7EXAMPLE"}`, `{"q":"[redacted]"}`, 1},
		{"google", `{"q":"AIzaSyA-abcdefghijklmnopqrstu"}`, `{"q":"[redacted]"}`, 1},
		{"bearer header value", `{"h":"Bearer abc.def.ghi123"}`, `{"h":"[redacted]"}`, 1},
		{"jwt", `{"q":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig"}`, `{"q":"[redacted]"}`, 1},
		{"pem", `{"q":"-----BEGIN OPENSSH PRIVATE KEY-----\nabc"}`, `{"q":"[redacted]"}`, 1},
		{"url with password", `{"u":"postgres://app:s3cret@db:5432/x"}`, `{"u":"[redacted]"}`, 1},
		{"url without password", `{"u":"https://example.com/a?b=c"}`, `{"u":"https://example.com/a?b=c"}`, 0},
		{"high entropy", `{"q":"Zm9vYmFyMTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3A"}`, `{"q":"[redacted]"}`, 1},
		{"git sha is kept", `{"q":"3f786850e387550fdab836ed7e6dc881de23001b"}`, `{"q":"3f786850e387550fdab836ed7e6dc881de23001b"}`, 0},
		{"uuid is kept", `{"q":"123e4567-e89b-12d3-a456-426614174000"}`, `{"q":"123e4567-e89b-12d3-a456-426614174000"}`, 0},
		{"prose is kept", `{"q":"please summarise the quarterly report for 2026"}`, `{"q":"please summarise the quarterly report for 2026"}`, 0},
		{"short prefix is kept", `{"q":"sk-1"}`, `{"q":"sk-1"}`, 0},
		{"monkey is a key", `{"monkey":"banana"}`, `{"monkey":"[redacted]"}`, 1},
		{"numbers as written", `{"n":12345678901234567890}`, `{"n":12345678901234567890}`, 0},
	} {
		got, n, err := redact([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if string(got) != tc.want || n != tc.n {
			t.Errorf("%s: redact(%s) = %s (%d), want %s (%d)", tc.name, tc.in, got, n, tc.want, tc.n)
		}
	}
	if _, _, err := redact([]byte(`{"a":`)); err == nil {
		t.Error("invalid JSON: no error")
	}
}

// TestAuditArgsModes: --audit-args redacts, --audit-args=raw does not
// (the control), and without it no values are kept.
func TestAuditArgsModes(t *testing.T) {
	const args = `{"path":"/x","token":"ghp_abcdefghijklmnopqrstuvwxyz0123456789"}`
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{AuditArgs: true}, `{"path":"/x","token":"[redacted]"}`},
		{Options{AuditArgs: true, AuditArgsRaw: true}, args},
		{Options{}, ``},
	} {
		tc.opts.MaxMessage = 1 << 20
		s := newRawOpts(t, tc.opts)
		s.client(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":` + args + `}}`)
		if got := s.atServer(); !strings.Contains(got, "ghp_abc") {
			t.Fatalf("the server must get the arguments as sent: %s", got)
		}
		s.answer(`{}`)
		s.atClient()
		if recs := s.audit.records(t); len(recs) != 1 || string(recs[0].Args) != tc.want {
			t.Errorf("%+v: args %s, want %s", tc.opts, recs[0].Args, tc.want)
		}
	}
}
