package policy

import (
	"errors"
	"strings"
	"testing"
)

// TestAllowHostFixSpecific: each refused entry's fix names the exact
// entry to write, or says why none can allow it; the generic form is only
// for what cannot be read.
func TestAllowHostFixSpecific(t *testing.T) {
	for _, c := range []struct{ entry, fix string }{
		{"localhost", "drop --allow-host localhost: the host's loopback services never reach the sandbox"},
		{"localhost:8080", "drop --allow-host localhost:8080:"},
		{"127.0.0.1", "drop --allow-host 127.0.0.1:"},
		{"[::1]:80", "drop --allow-host [::1]:80:"},
		{"https://example.com/x", "--allow-host example.com"},
		{"https://example.com:8443/x", "--allow-host example.com:8443"},
		{"example.com/path", "--allow-host example.com"},
		{"::ffff:10.1.2.3", "--allow-host 10.1.2.3"},
		{"10.1.2.3/8", "--allow-host 10.0.0.0/8"},
		{"*", "list the hosts, or a domain with its subdomains: --allow-host example.com --allow-host *.example.com"},
		{"169.254.169.254", "drop --allow-host 169.254.169.254: link-local and cloud metadata"},
		{"a b", allowHostFix},
	} {
		t.Run(c.entry, func(t *testing.T) {
			err := Policy{Workdir: "/w", AllowHosts: []string{c.entry}}.Validate()
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.Field != "allow-host" {
				t.Fatalf("%q not refused as an allow-host entry: %v", c.entry, err)
			}
			if !strings.HasPrefix(ie.Fix, c.fix) {
				t.Errorf("fix %q, want it to start %q", ie.Fix, c.fix)
			}
			if c.fix != allowHostFix && ie.Fix == allowHostFix {
				t.Errorf("generic fix for %q", c.entry)
			}
		})
	}
}
