package allowlist

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		ip     string
		reason string // "" = public
		never  bool
	}{
		{"93.184.216.34", "", false},
		{"8.8.8.8", "", false},
		{"2606:4700::1111", "", false},
		{"0.0.0.0", ReasonUnspecified, true},
		{"0.1.2.3", ReasonUnspecified, true},
		{"127.0.0.1", ReasonLoopback, true},
		{"127.255.255.254", ReasonLoopback, true},
		{"169.254.169.254", ReasonMetadata, true},
		{"169.254.1.1", ReasonLinkLocal, true},
		{"168.63.129.16", ReasonMetadata, true},
		{"224.0.0.1", ReasonMulticast, true},
		{"239.255.255.250", ReasonMulticast, true},
		{"240.0.0.1", ReasonReserved, true},
		{"255.255.255.255", ReasonBroadcast, true},
		{"::", ReasonUnspecified, true},
		{"::1", ReasonLoopback, true},
		{"fe80::1", ReasonLinkLocal, true},
		{"febf::1", ReasonLinkLocal, true},
		{"ff02::1", ReasonMulticast, true},
		{"fd00:ec2::254", ReasonMetadata, true},
		{"10.0.0.1", ReasonPrivate, false},
		{"172.16.0.1", ReasonPrivate, false},
		{"172.31.255.255", ReasonPrivate, false},
		{"172.32.0.1", "", false},
		{"192.168.1.1", ReasonPrivate, false},
		{"100.64.0.1", ReasonPrivate, false},
		{"100.127.255.255", ReasonPrivate, false},
		{"100.128.0.1", "", false},
		{"198.18.0.1", ReasonPrivate, false},
		{"198.19.255.255", ReasonPrivate, false},
		{"198.20.0.1", "", false},
		{"fc00::1", ReasonPrivate, false},
		{"fd12:3456::1", ReasonPrivate, false},
		{"64:ff9b:1::7f00:1", ReasonPrivate, false}, // local-use NAT64: where the IPv4 sits is the operator's choice
		{"64:ff9b:1:7f00:1::", ReasonPrivate, false},
		{"64:ff9b:2::1", "", false},
		// IPv4 inside IPv6: judged by the IPv4 address.
		{"::ffff:127.0.0.1", ReasonLoopback, true},
		{"::ffff:7f00:1", ReasonLoopback, true},
		{"::ffff:169.254.169.254", ReasonMetadata, true},
		{"::ffff:10.1.2.3", ReasonPrivate, false},
		{"::ffff:8.8.8.8", "", false},
		{"64:ff9b::7f00:1", ReasonLoopback, true},    // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", ReasonMetadata, true}, // NAT64 of 169.254.169.254
		{"64:ff9b::a01:203", ReasonPrivate, false},   // NAT64 of 10.1.2.3
		{"64:ff9b::808:808", "", false},              // NAT64 of 8.8.8.8
		{"2002:7f00:1::", ReasonLoopback, true},      // 6to4 of 127.0.0.1
		{"2002:7f00:0001:1234::5", ReasonLoopback, true},
		{"2002:a9fe:a9fe::1", ReasonMetadata, true},
		{"2002:c0a8:101::1", ReasonPrivate, false}, // 6to4 of 192.168.1.1
		{"2002:808:808::1", "", false},
		{"::7f00:1", ReasonLoopback, true}, // IPv4-compatible 127.0.0.1
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			v := classify(netip.MustParseAddr(tt.ip))
			got, never := "", false
			if v.rule != nil {
				got, never = v.rule.reason, v.rule.never
			}
			if got != tt.reason || never != tt.never {
				t.Fatalf("classify(%s) = (%q, never=%v), want (%q, never=%v)", tt.ip, got, never, tt.reason, tt.never)
			}
		})
	}
}

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in      string
		defPort uint16
		name    string // want a host name
		addr    string // or want an address
		port    uint16
		wantErr bool
	}{
		{in: "example.com:443", name: "example.com", port: 443},
		{in: "Example.COM.:443", name: "example.com", port: 443},
		{in: "example.com", defPort: 80, name: "example.com", port: 80},
		{in: "example.com", wantErr: true}, // CONNECT needs a port
		{in: "127.0.0.1:80", addr: "127.0.0.1", port: 80},
		{in: "127.0.0.1.:80", addr: "127.0.0.1", port: 80},
		{in: "2130706433:80", addr: "127.0.0.1", port: 80},
		{in: "017700000001:80", addr: "127.0.0.1", port: 80},
		{in: "0177.0.0.1:80", addr: "127.0.0.1", port: 80},
		{in: "0x7f.1:80", addr: "127.0.0.1", port: 80},
		{in: "0X7F.0.0.1:80", addr: "127.0.0.1", port: 80},
		{in: "0x7f000001:80", addr: "127.0.0.1", port: 80},
		{in: "127.1:80", addr: "127.0.0.1", port: 80},
		{in: "127.0.1:80", addr: "127.0.0.1", port: 80},
		{in: "0:80", addr: "0.0.0.0", port: 80},
		{in: "0251.0376.0251.0376:80", addr: "169.254.169.254", port: 80},
		{in: "[::1]:443", addr: "::1", port: 443},
		{in: "[::ffff:127.0.0.1]:443", addr: "127.0.0.1", port: 443},
		{in: "[::ffff:7f00:1]:443", addr: "127.0.0.1", port: 443},
		{in: "[::]:443", addr: "::", port: 443},
		{in: "[fd00:ec2::254]", defPort: 80, addr: "fd00:ec2::254", port: 80},
		{in: "[64:ff9b::7f00:1]:80", addr: "64:ff9b::7f00:1", port: 80},
		{in: "localhost:80", name: "localhost", port: 80},
		{in: "localhost.:80", name: "localhost", port: 80},
		{in: "under_score.example:80", name: "under_score.example", port: 80},
		// Refused as unparseable.
		{in: "256.0.0.1:80", wantErr: true},
		{in: "1.2.3.4.5:80", wantErr: true},
		{in: "08.0.0.1:80", wantErr: true},
		{in: "0x:80", wantErr: true},
		{in: "4294967296:80", wantErr: true},
		{in: "1.16777216:80", wantErr: true},
		{in: "example.123:80", wantErr: true},
		{in: "127.0.0.1..:80", wantErr: true},
		{in: "[fe80::1%25eth0]:80", wantErr: true},
		{in: "[fe80::1%eth0]:80", wantErr: true},
		{in: "ex ample.com:80", wantErr: true},
		{in: "exa%6dple.com:80", wantErr: true},
		{in: "bücher.example:80", wantErr: true},
		{in: "-bad.example:80", wantErr: true},
		{in: "example.com:0", wantErr: true},
		{in: "example.com:65536", wantErr: true},
		{in: "example.com:+80", wantErr: true},
		{in: "example.com:", wantErr: true},
		{in: ":80", wantErr: true},
		{in: "::1:80", wantErr: true},
		{in: "[127.0.0.1]:80", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTarget(tt.in, tt.defPort)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseTarget(%q) = %+v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTarget(%q): %v", tt.in, err)
			}
			want := Target{name: tt.name, port: tt.port}
			if tt.addr != "" {
				want.addr = netip.MustParseAddr(tt.addr)
			}
			if got != want {
				t.Fatalf("ParseTarget(%q) = %v (name %q), want %v (name %q)", tt.in, got, got.name, want, want.name)
			}
		})
	}
}

func TestParseAllow(t *testing.T) {
	valid := []struct {
		in   string
		kind entryKind
		port int
	}{
		{"example.com", kindHost, 0},
		{"Example.COM.", kindHost, 0},
		{"example.com:8443", kindHost, 8443},
		{"example.com:*", kindHost, anyPort},
		{"*.example.com", kindSuffix, 0},
		{"*.example.com:*", kindSuffix, anyPort},
		{"10.1.2.3", kindAddr, 0},
		{"10.1.2.3:8080", kindAddr, 8080},
		{"10.1.2.3:*", kindAddr, anyPort},
		{"93.184.216.34", kindAddr, 0},
		{"fd00::1", kindAddr, 0},
		{"[fd00::1]", kindAddr, 0},
		{"[fd00::1]:8443", kindAddr, 8443},
		{"[fd00::1]:*", kindAddr, anyPort},
		{"example.com:08443", kindHost, 8443},
		{"*." + strings.Repeat("a.", 124) + "com", kindSuffix, 0}, // x.<that> is 253 bytes
		{"64:ff9b::a00:0/104", kindPrefix, anyPort},               // NAT64 of 10.0.0.0/8
		{"2002:808:800::/40", kindPrefix, anyPort},
		{"10.0.0.0/8", kindPrefix, anyPort},
		{"198.18.0.0/15", kindPrefix, anyPort},
		{"fc00::/7", kindPrefix, anyPort},
		{"2001:db8::/32", kindPrefix, anyPort},
		{"::1:0:0:0/80", kindPrefix, anyPort}, // above it
	}
	for _, tt := range valid {
		t.Run("valid/"+tt.in, func(t *testing.T) {
			l, err := Parse([]string{tt.in})
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if len(l.entries) != 1 || l.entries[0].kind != tt.kind || l.entries[0].port != tt.port {
				t.Fatalf("Parse(%q) = %+v, want kind %d port %d", tt.in, l.entries, tt.kind, tt.port)
			}
		})
	}

	invalid := []struct {
		in, mention string // the error must mention this, so people can act on it
	}{
		{"", "empty"},
		{"*", "bare *"},
		{"*.*", "'*'"},
		{"foo.*.com", "'*'"},
		{"exa mple.com", "whitespace"},
		{"127.0.0.1", "never"},
		{"::1", "never"},
		{"169.254.169.254", "never"},
		{"[fd00:ec2::254]", "never"},
		{"0.0.0.0", "never"},
		{"224.0.0.1", "never"},
		{"::ffff:10.1.2.3", "10.1.2.3"},
		{"2130706433", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"10.1.2.3/8", "10.0.0.0/8"},
		{"127.0.0.0/8", "never"},
		{"169.254.0.0/16", "never"},
		{"127.0.0.0/16", "never"},
		{"0.0.0.0/0", "/0"},
		{"::/0", "/0"},
		// An IPv6 range around the IPv4-mapped block, whose addresses
		// the proxy matches as IPv4 (found by FuzzParseAllow: "::/80").
		{"::/80", "IPv4-mapped block ::ffff:0.0.0.0/96"},
		{"::/64", "IPv4-mapped block"},
		{"::/1", "IPv4-mapped block"},
		{"::ffff:0:0/96", "IPv4-mapped prefix"},
		{"10.0.0.0/8:443", "CIDR"},
		{"example.com:0", "port"},
		{"example.com:http", "port"},
		{"example.com:", "port"},
		{"bücher.example", "punycode"},
		{"[example.com]", "brackets"},
		// IPv6 zones: an entry names an address, not an interface.
		{"fe80::1%eth0", `zone "%eth0"`},
		{"[fe80::1%25eth0]:443", `zone "%25eth0"`},
		{"fd00::1%eth0", "write fd00::1"},
		// Ports: 1 to 65535 or *, and never empty.
		{"example.com:65536", "1 to 65535"},
		{"example.com:-1", "1 to 65535"},
		{"example.com:", "1 to 65535"},
		{"[fd00::1]:", "1 to 65535"}, // was accepted as the web ports
		{"[fd00::1]:0", "1 to 65535"},
		{"fd00::1:*", "[addr]:port"},
		// Patterns: '*' only as the whole first label.
		{"*.", "bare *"},
		{"**.example.com", "*.example.com"},
		{"a*.example.com", "*.example.com"},
		{"*.example.*", "'*'"},
		// URLs and paths: an entry is a host, not a location.
		{"http://example.com", `URL is not an entry: write its host, as host or host:port (here: "example.com")`},
		{"https://example.com:8443/x", `"example.com:8443"`},
		{"example.com/path", `no path (here: "example.com")`},
		{"10.0.0/8", "CIDR"},
		// Ranges that carry only never-reachable IPv4 addresses.
		{"64:ff9b::7f00:0/104", "127.0.0.0/8"},
		{"2002:7f00::/24", "127.0.0.0/8"},
		{"2002:a9fe:a9fe::/48", "169.254.169.254/32 (cloud metadata endpoint)"},
		{"2002:a9fe:a900::/40", "inside 169.254.0.0/16 (link-local)"},
		{"::/104", "0.0.0.0/8"},
		// A suffix no subdomain of fits in a host name.
		{"*." + strings.Repeat("a.", 125) + "com", "no subdomain"},
	}
	for _, tt := range invalid {
		t.Run("invalid/"+tt.in, func(t *testing.T) {
			_, err := Parse([]string{"ok.example", tt.in})
			if !errors.Is(err, ErrInvalidEntry) {
				t.Fatalf("Parse(%q) = %v, want an error wrapping ErrInvalidEntry", tt.in, err)
			}
			if !strings.Contains(err.Error(), tt.mention) || strings.Contains(err.Error(), "BUG(") {
				t.Fatalf("Parse(%q) error %q should mention %q", tt.in, err, tt.mention)
			}
			if !strings.Contains(err.Error(), strconv.Quote(tt.in)) || strings.Contains(err.Error(), `"ok.example"`) {
				t.Fatalf("Parse(%q) error %q should name that entry, and only it", tt.in, err)
			}
		})
	}

	t.Run("all errors joined", func(t *testing.T) {
		_, err := Parse([]string{"*", "ok.example", "127.0.0.1"})
		if err == nil || !strings.Contains(err.Error(), `"*"`) || !strings.Contains(err.Error(), `"127.0.0.1"`) {
			t.Fatalf("error %v should name both bad entries", err)
		}
	})
	t.Run("empty list allows nothing", func(t *testing.T) {
		l, err := Parse(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := l.hostEntry("example.com", 443); ok {
			t.Fatal("empty list allowed a host")
		}
	})
}

func TestAllowMatching(t *testing.T) {
	l, err := Parse([]string{"example.com", "api.example.org:8443", "any.example.net:*",
		"*.cdn.example", "10.1.2.3", "10.9.9.9:*", "192.168.0.0/16", "fd00::1", "198.51.100.7:22"})
	if err != nil {
		t.Fatal(err)
	}
	hosts := []struct {
		name string
		port uint16
		want bool
	}{
		{"example.com", 80, true},
		{"example.com", 443, true},
		{"example.com", 8080, false},
		{"www.example.com", 443, false}, // exact host entries do not cover subdomains
		{"api.example.org", 8443, true},
		{"api.example.org", 443, false},
		{"any.example.net", 1, true},
		{"a.cdn.example", 443, true},
		{"a.b.cdn.example", 80, true},
		{"cdn.example", 443, false}, // *.domain: subdomains only
		{"xcdn.example", 443, false},
		{"a.cdn.example", 8443, false},
	}
	for _, tt := range hosts {
		if _, ok := l.hostEntry(tt.name, tt.port); ok != tt.want {
			t.Errorf("hostEntry(%s, %d) = %v, want %v", tt.name, tt.port, ok, tt.want)
		}
	}
	addrs := []struct {
		ip   string
		port uint16
		want bool
	}{
		{"10.1.2.3", 443, true},
		{"10.1.2.3", 8080, false},
		{"10.1.2.4", 443, false},
		{"10.9.9.9", 5432, true},
		{"192.168.44.1", 5432, true}, // CIDR entries: every port
		{"192.169.0.1", 443, false},
		{"::ffff:10.1.2.3", 443, true},
		{"64:ff9b::a01:203", 443, true}, // NAT64 of 10.1.2.3
		{"fd00::1", 80, true},
		{"fd00::2", 80, false},
		{"198.51.100.7", 22, true},
		{"198.51.100.7", 443, false},
	}
	for _, tt := range addrs {
		if _, ok := l.addrEntry(netip.MustParseAddr(tt.ip), tt.port); ok != tt.want {
			t.Errorf("addrEntry(%s, %d) = %v, want %v", tt.ip, tt.port, ok, tt.want)
		}
	}
}
