package allowlist

import (
	"strings"
	"testing"
)

// TestParseAllowRefusesLocalhost: localhost names loopback (RFC 6761), so
// an entry for it is refused like 127.0.0.1; a name that merely contains
// it is not.
func TestParseAllowRefusesLocalhost(t *testing.T) {
	for _, e := range []string{"localhost", "localhost:8080", "LOCALHOST.", "*.localhost", "app.localhost:*", "127.0.0.1:8080"} {
		if _, err := Parse([]string{e}); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("Parse(%q) = %v, want a loopback refusal", e, err)
		}
	}
	for _, e := range []string{"localhost.example.com", "notlocalhost", "mylocalhost.dev:443"} {
		if _, err := Parse([]string{e}); err != nil {
			t.Errorf("Parse(%q) = %v, want accepted", e, err)
		}
	}
}
