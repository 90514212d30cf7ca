package proxy

import (
	"errors"
	"net/netip"
	"testing"
)

// TestJudgeOwn: the proxy host's own addresses, public or private, IPv4 or
// IPv6, are refused whatever range or name entry covers them; an entry
// naming the exact address (with the port) opens it; an address that is
// not the host's is judged as before; interfaces that cannot be read
// refuse.
func TestJudgeOwn(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("203.0.113.5"), netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("2001:db8::5")}
	mk := func(allow ...string) *Proxy {
		p, err := New(Config{Allow: allow})
		if err != nil {
			t.Fatal(err)
		}
		p.ownAddrs = func() ([]netip.Addr, error) { return own, nil }
		return p
	}
	addr := func(s string, port uint16) target { return mustTarget(t, netip.MustParseAddr(s).String(), port) }
	name := func(s string, port uint16) target { return mustTarget(t, s, port) }
	for _, c := range []struct {
		name   string
		allow  []string
		t      target
		ip     string
		reason string // "" = allowed
	}{
		{"public own address, by IP", []string{"203.0.113.5/32"}, addr("203.0.113.5", 8080), "203.0.113.5", ""},
		{"public own address, by name", []string{"example.test"}, name("example.test", 443), "203.0.113.5", reasonOwnAddr},
		{"private own address, range allowed", []string{"10.0.0.0/8"}, addr("10.1.2.3", 80), "10.1.2.3", reasonOwnAddr},
		{"private own address, exact entry", []string{"10.1.2.3"}, addr("10.1.2.3", 80), "10.1.2.3", ""},
		{"exact entry, other port", []string{"10.1.2.3"}, addr("10.1.2.3", 8080), "10.1.2.3", reasonOwnAddr},
		{"exact entry with port", []string{"10.1.2.3:8080"}, addr("10.1.2.3", 8080), "10.1.2.3", ""},
		{"IPv6 own address, range allowed", []string{"2001:db8::/32"}, addr("2001:db8::5", 443), "2001:db8::5", reasonOwnAddr},
		{"IPv6 own address, exact entry", []string{"[2001:db8::5]"}, addr("2001:db8::5", 443), "2001:db8::5", ""},
		{"neighbour in the same range", []string{"10.0.0.0/8"}, addr("10.1.2.4", 80), "10.1.2.4", ""},
		{"public, not own", []string{"example.test"}, name("example.test", 443), "198.51.100.7", ""},
		{"loopback stays never", []string{"example.test"}, name("example.test", 443), "127.0.0.1", reasonLoopback},
	} {
		p := mk(c.allow...)
		r := p.judge(c.t, netip.MustParseAddr(c.ip))
		got := ""
		if r != nil {
			got = r.reason
		}
		if got != c.reason {
			t.Errorf("%s: judge = %q, want %q (%+v)", c.name, got, c.reason, r)
		}
	}
	p := mk("10.0.0.0/8")
	p.ownAddrs = func() ([]netip.Addr, error) { return nil, errors.New("netlink gone") }
	if r := p.judge(addr("10.1.2.4", 80), netip.MustParseAddr("10.1.2.4")); r == nil || r.reason != reasonOwnAddr {
		t.Errorf("unreadable interfaces: %+v, want a refusal", r)
	}
	// The real reader lists this host's loopback at least.
	if as, err := interfaceAddrs(); err != nil || len(as) == 0 {
		t.Errorf("interfaceAddrs = %v, %v", as, err)
	}
}
