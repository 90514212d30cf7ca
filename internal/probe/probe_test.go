package probe

import (
	"net/netip"
	"strings"
	"testing"
)

func TestProxyUDPAddr(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string // "" = an error
	}{
		{"upper case", map[string]string{"HTTP_PROXY": "http://127.0.0.1:3128"}, "127.0.0.1:3128"},
		{"lower case only", map[string]string{"http_proxy": "http://127.0.0.1:41234"}, "127.0.0.1:41234"},
		{"upper case first", map[string]string{"HTTP_PROXY": "http://127.0.0.1:1", "http_proxy": "http://127.0.0.1:2"}, "127.0.0.1:1"},
		{"IPv6", map[string]string{"HTTP_PROXY": "http://[::1]:8080"}, "[::1]:8080"},
		{"no port", map[string]string{"HTTP_PROXY": "http://127.0.0.1"}, ""},
		{"not a URL", map[string]string{"HTTP_PROXY": "127.0.0.1:3128"}, ""},
		{"none", map[string]string{"HTTPS_PROXY": "http://127.0.0.1:3128"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := proxyUDPAddr(func(k string) string { return tt.env[k] })
			switch {
			case tt.want == "" && err == nil:
				t.Errorf("= %q, want an error", got)
			case tt.want != "" && (err != nil || got != tt.want):
				t.Errorf("= %q, %v, want %q", got, err, tt.want)
			case err != nil && !strings.Contains(err.Error(), "proxy") && !strings.Contains(err.Error(), "PROXY"):
				t.Errorf("error %q does not name the variable", err)
			}
		})
	}
}

func TestParseInetAton(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" = not an inet_aton spelling
	}{
		{"127.0.0.1", "127.0.0.1"}, {"127.1", "127.0.0.1"}, {"0x7f.1", "127.0.0.1"}, {"2130706433", "127.0.0.1"},
		{"017700000001", "127.0.0.1"}, {"0177.0.0.1", "127.0.0.1"}, {"0", "0.0.0.0"}, {"10.1.256", "10.1.1.0"},
		{"256.1.1.1", ""}, {"localhost", ""}, {"1.2.3.4.5", ""}, {"", ""}, {"1..2", ""},
	}
	for _, tt := range tests {
		got, ok := parseInetAton(tt.in)
		if tt.want == "" {
			if ok {
				t.Errorf("%q = %v, want not an address", tt.in, got)
			}
			continue
		}
		if !ok || got != netip.MustParseAddr(tt.want) {
			t.Errorf("%q = %v %v, want %s", tt.in, got, ok, tt.want)
		}
	}
}
