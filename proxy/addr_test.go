package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
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
		{"0.0.0.0", reasonUnspecified, true},
		{"0.1.2.3", reasonUnspecified, true},
		{"127.0.0.1", reasonLoopback, true},
		{"127.255.255.254", reasonLoopback, true},
		{"169.254.169.254", reasonMetadata, true},
		{"169.254.1.1", reasonLinkLocal, true},
		{"168.63.129.16", reasonMetadata, true},
		{"224.0.0.1", reasonMulticast, true},
		{"239.255.255.250", reasonMulticast, true},
		{"240.0.0.1", reasonReserved, true},
		{"255.255.255.255", reasonBroadcast, true},
		{"::", reasonUnspecified, true},
		{"::1", reasonLoopback, true},
		{"fe80::1", reasonLinkLocal, true},
		{"febf::1", reasonLinkLocal, true},
		{"ff02::1", reasonMulticast, true},
		{"fd00:ec2::254", reasonMetadata, true},
		{"10.0.0.1", reasonPrivate, false},
		{"172.16.0.1", reasonPrivate, false},
		{"172.31.255.255", reasonPrivate, false},
		{"172.32.0.1", "", false},
		{"192.168.1.1", reasonPrivate, false},
		{"100.64.0.1", reasonPrivate, false},
		{"100.127.255.255", reasonPrivate, false},
		{"100.128.0.1", "", false},
		{"198.18.0.1", reasonPrivate, false},
		{"198.19.255.255", reasonPrivate, false},
		{"198.20.0.1", "", false},
		{"fc00::1", reasonPrivate, false},
		{"fd12:3456::1", reasonPrivate, false},
		{"64:ff9b:1::7f00:1", reasonPrivate, false}, // local-use NAT64: where the IPv4 sits is the operator's choice
		{"64:ff9b:1:7f00:1::", reasonPrivate, false},
		{"64:ff9b:2::1", "", false},
		// IPv4 inside IPv6: judged by the IPv4 address.
		{"::ffff:127.0.0.1", reasonLoopback, true},
		{"::ffff:7f00:1", reasonLoopback, true},
		{"::ffff:169.254.169.254", reasonMetadata, true},
		{"::ffff:10.1.2.3", reasonPrivate, false},
		{"::ffff:8.8.8.8", "", false},
		{"64:ff9b::7f00:1", reasonLoopback, true},    // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", reasonMetadata, true}, // NAT64 of 169.254.169.254
		{"64:ff9b::a01:203", reasonPrivate, false},   // NAT64 of 10.1.2.3
		{"64:ff9b::808:808", "", false},              // NAT64 of 8.8.8.8
		{"2002:7f00:1::", reasonLoopback, true},      // 6to4 of 127.0.0.1
		{"2002:7f00:0001:1234::5", reasonLoopback, true},
		{"2002:a9fe:a9fe::1", reasonMetadata, true},
		{"2002:c0a8:101::1", reasonPrivate, false}, // 6to4 of 192.168.1.1
		{"2002:808:808::1", "", false},
		{"::7f00:1", reasonLoopback, true}, // IPv4-compatible 127.0.0.1
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
			got, err := parseTarget(tt.in, tt.defPort)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseTarget(%q) = %+v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseTarget(%q): %v", tt.in, err)
			}
			want := target{name: tt.name, port: tt.port}
			if tt.addr != "" {
				want.addr = netip.MustParseAddr(tt.addr)
			}
			if got != want {
				t.Fatalf("parseTarget(%q) = %v (name %q), want %v (name %q)", tt.in, got, got.name, want, want.name)
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
	}
	for _, tt := range valid {
		t.Run("valid/"+tt.in, func(t *testing.T) {
			l, err := ParseAllow([]string{tt.in})
			if err != nil {
				t.Fatalf("ParseAllow(%q): %v", tt.in, err)
			}
			if len(l.entries) != 1 || l.entries[0].kind != tt.kind || l.entries[0].port != tt.port {
				t.Fatalf("ParseAllow(%q) = %+v, want kind %d port %d", tt.in, l.entries, tt.kind, tt.port)
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
			_, err := ParseAllow([]string{"ok.example", tt.in})
			if !errors.Is(err, ErrInvalidEntry) {
				t.Fatalf("ParseAllow(%q) = %v, want an error wrapping ErrInvalidEntry", tt.in, err)
			}
			if !strings.Contains(err.Error(), tt.mention) || strings.Contains(err.Error(), "BUG(") {
				t.Fatalf("ParseAllow(%q) error %q should mention %q", tt.in, err, tt.mention)
			}
			if !strings.Contains(err.Error(), strconv.Quote(tt.in)) || strings.Contains(err.Error(), `"ok.example"`) {
				t.Fatalf("ParseAllow(%q) error %q should name that entry, and only it", tt.in, err)
			}
		})
	}

	t.Run("all errors joined", func(t *testing.T) {
		_, err := ParseAllow([]string{"*", "ok.example", "127.0.0.1"})
		if err == nil || !strings.Contains(err.Error(), `"*"`) || !strings.Contains(err.Error(), `"127.0.0.1"`) {
			t.Fatalf("error %v should name both bad entries", err)
		}
	})
	t.Run("empty list allows nothing", func(t *testing.T) {
		l, err := ParseAllow(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := l.hostEntry("example.com", 443); ok {
			t.Fatal("empty list allowed a host")
		}
	})
}

func TestAllowMatching(t *testing.T) {
	l, err := ParseAllow([]string{"example.com", "api.example.org:8443", "any.example.net:*",
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

// fakeResolver answers from a table; a name with several answer sets gets
// them in turn, one per lookup (the last one repeats).
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

func newResolver(tbl map[string][]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]netip.Addr{}, calls: map[string]int{}}
	for name, ips := range tbl {
		var set []netip.Addr
		for _, s := range ips {
			if s == "|" { // separates successive answer sets
				r.answers[name] = append(r.answers[name], set)
				set = nil
				continue
			}
			set = append(set, netip.MustParseAddr(s))
		}
		r.answers[name] = append(r.answers[name], set)
	}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sets, ok := r.answers[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	i := min(r.calls[host], len(sets)-1)
	r.calls[host]++
	return sets[i], nil
}

func TestDecide(t *testing.T) {
	res := newResolver(map[string][]string{
		"public.test":   {"93.184.216.34"},
		"evil.test":     {"127.0.0.1"},
		"meta.test":     {"169.254.169.254"},
		"mapped.test":   {"::ffff:127.0.0.1"},
		"mixed.test":    {"93.184.216.34", "127.0.0.1"}, // one good, one refused answer
		"rebind.test":   {"93.184.216.34", "|", "127.0.0.1"},
		"internal.test": {"10.1.2.3"},
		"intern2.test":  {"10.7.7.7"},
		"ula.test":      {"fd00::5"},
	})
	p, err := New(Config{
		Allow: []string{"public.test", "evil.test", "meta.test", "mapped.test", "mixed.test", "rebind.test",
			"internal.test", "intern2.test", "10.1.2.3", "ula.test", "*.wild.test", "93.184.216.34:8080"},
		Resolver: res,
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		target string
		reason string // "" = allowed
		fix    string // a refusal must say this in its fix
	}{
		{"public.test:443", "", ""},
		{"public.test:8443", reasonNotAllowed, "--allow-host public.test:8443"},
		{"other.test:443", reasonNotAllowed, "--allow-host other.test"},
		{"evil.test:443", reasonLoopback, "not possible"},
		{"meta.test:80", reasonMetadata, "not possible"},
		{"mapped.test:80", reasonLoopback, ""},
		{"mixed.test:443", reasonLoopback, ""},
		{"rebind.test:443", "", ""},             // first answer: public
		{"rebind.test:443", reasonLoopback, ""}, // second answer: loopback, decided anew
		{"internal.test:443", "", ""},           // names 10.1.2.3 explicitly
		{"intern2.test:443", reasonPrivate, "--allow-host 10.7.7.7 next to the entry for intern2.test"},
		{"ula.test:443", reasonPrivate, "--allow-host fd00::5"},
		{"nx.wild.test:443", reasonDNS, ""},
		{"10.1.2.3:443", "", ""},
		{"10.1.2.3:22", reasonPrivate, "--allow-host 10.1.2.3:22"},
		{"10.1.2.4:443", reasonPrivate, "--allow-host 10.1.2.4 (or the range --allow-host 10.0.0.0/8)"},
		{"93.184.216.34:8080", "", ""},
		{"93.184.216.34:443", reasonNotAllowed, "--allow-host 93.184.216.34"},
		{"127.0.0.1:443", reasonLoopback, ""},
		{"[::ffff:169.254.169.254]:80", reasonMetadata, ""},
		{"[64:ff9b::7f00:1]:443", reasonLoopback, ""},
		{"[2002:7f00:1::]:443", reasonLoopback, ""},
	}
	for _, tt := range tests {
		tg, err := parseTarget(tt.target, 0)
		if err != nil {
			t.Fatalf("parseTarget(%q): %v", tt.target, err)
		}
		d := p.decide(context.Background(), "CONNECT", tt.target, tg)
		got := ""
		if d.refusal != nil {
			got = d.refusal.reason
		}
		if got != tt.reason {
			t.Errorf("decide(%s) reason = %q, want %q (%+v)", tt.target, got, tt.reason, d.refusal)
			continue
		}
		if d.refusal != nil && !strings.Contains(d.refusal.fix, tt.fix) {
			t.Errorf("decide(%s) fix = %q, want it to contain %q", tt.target, d.refusal.fix, tt.fix)
		}
		if d.refusal == nil && len(d.ips) == 0 {
			t.Errorf("decide(%s) allowed with no addresses to dial", tt.target)
		}
	}
}

// TestControlRecheck drives the dialer's re-check directly: addresses and
// ports that the decision did not check are refused.
func TestControlRecheck(t *testing.T) {
	p, err := New(Config{Allow: []string{"public.test", "10.1.2.3"},
		Resolver: newResolver(map[string][]string{"public.test": {"93.184.216.34"}})})
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := parseTarget("public.test:443", 0)
	d := p.decide(context.Background(), "CONNECT", "public.test:443", tg)
	if d.refusal != nil {
		t.Fatalf("control decision refused: %+v", d.refusal)
	}
	tests := []struct {
		ap   string
		want bool
	}{
		{"93.184.216.34:443", true},
		{"[::ffff:93.184.216.34]:443", true},
		{"93.184.216.34:80", false},
		{"93.184.216.35:443", false},
		{"127.0.0.1:443", false},
		{"10.1.2.3:443", false}, // allowed in general, but not what this decision checked
	}
	for _, tt := range tests {
		if got := p.permits(d, netip.MustParseAddrPort(tt.ap)); got != tt.want {
			t.Errorf("permits(%s) = %v, want %v", tt.ap, got, tt.want)
		}
	}
	// A decision whose address list was tampered with is still re-judged.
	bad := &decision{t: target{name: "public.test", port: 443}, ips: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}
	if p.permits(bad, netip.MustParseAddrPort("127.0.0.1:443")) {
		t.Error("permits accepted loopback because a decision listed it")
	}
}

// BenchmarkDecide is the proxy's decision for one request: parse the
// target, match the allow-list, resolve (a fixed answer here) and judge
// every address. It runs before every connection the proxy opens.
func BenchmarkDecide(b *testing.B) {
	entries := []string{"*.example.com", "api.github.com:443", "10.1.2.3"}
	for i := 0; i < 100; i++ {
		entries = append(entries, fmt.Sprintf("host%d.example.org", i))
	}
	p, err := New(Config{Allow: entries, Resolver: newResolver(map[string][]string{"www.example.com": {"93.184.216.34"}})})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		t, err := parseTarget("www.example.com:443", 443)
		if err != nil {
			b.Fatal(err)
		}
		if d := p.decide(b.Context(), "CONNECT", "www.example.com:443", t); d.refusal != nil {
			b.Fatal(d.refusal.reason)
		}
	}
}
