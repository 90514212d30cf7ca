package proxy

import (
	"encoding/json"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/refusals"
)

// TestRefusalNamesFix: every refusal names the exact flag that allows it
// in the CONNECT status line, the body, the audit line and the collector,
// once per target however often it is retried; an allowed request adds
// nothing (the control).
func TestRefusalNamesFix(t *testing.T) {
	var audit sandboxtest.SyncBuffer
	col := refusals.New(nil)
	res := newResolver(map[string][]string{"allowed.test": {"203.0.113.9"}, "internal.test": {"10.0.0.7"}, "meta.test": {"169.254.169.254"}})
	pt := startProxy(t, Config{
		Allow:    []string{"allowed.test:9", "internal.test:443", "meta.test:443"},
		Resolver: res, Audit: &audit, Refusals: col, Logger: slog.New(slog.DiscardHandler),
	})
	cases := []struct {
		target, fix, reason string
	}{
		{"other.test:443", "--allow-host other.test", reasonNotAllowed},
		{"other.test:22", "--allow-host other.test:22", reasonNotAllowed},
		{"internal.test:443", "--allow-host 10.0.0.7", reasonPrivate},
		{"meta.test:443", "", reasonMetadata},
	}
	for _, c := range cases {
		for range 2 { // a retry is counted, not named again
			resp, body, _, _ := pt.connect(t, c.target)
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("CONNECT %s: %s, want 403", c.target, resp.Status)
			}
			wantPhrase := "to allow it: " + c.fix
			if c.fix == "" {
				wantPhrase = "no flag allows it"
			}
			if !strings.Contains(resp.Status, wantPhrase) || !strings.Contains(resp.Status, c.reason) {
				t.Errorf("CONNECT %s: status line %q lacks %q and %q", c.target, resp.Status, wantPhrase, c.reason)
			}
			if c.fix != "" && !strings.Contains(body, c.fix) {
				t.Errorf("CONNECT %s: body lacks %q:\n%s", c.target, c.fix, body)
			}
		}
	}
	// The control: an allowed target is no refusal (its dial fails, which
	// is a 502 and not the collector's business).
	pt.connect(t, "allowed.test:9")

	got := col.List()
	if len(got) != len(cases) {
		t.Fatalf("collector kept %d refusals, want %d: %+v", len(got), len(cases), got)
	}
	for i, c := range cases {
		if got[i].Fix != c.fix || got[i].Reason != c.reason || got[i].Count != 2 || got[i].Kind != refusals.KindConnect {
			t.Errorf("refusal %d = %+v, want fix %q reason %q count 2", i, got[i], c.fix, c.reason)
		}
	}
	fixes := map[string]int{}
	for _, raw := range strings.Split(strings.TrimSpace(audit.String()), "\n") {
		var l struct{ Decision, Fix string }
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatal(err)
		}
		if l.Decision == "refuse" {
			fixes[l.Fix]++
		}
	}
	for _, c := range cases {
		if fixes[c.fix] != 2 {
			t.Errorf("audit: %d refusals with fix %q, want 2 (every decision is audited)", fixes[c.fix], c.fix)
		}
	}
}
