package allowlist

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseAllow feeds Parse a list of entries (the input split on
// newlines; no valid entry holds one) and checks that the list is refused
// exactly when some entry is, that every refused entry is named in the
// error, and that every accepted entry means what it says: it allows the
// host, address or range it names on exactly its ports, reads back the same
// from its canonical spelling, never names a range the proxy never connects
// to, and covers the targets ParseTarget makes of its own spelling.
func FuzzParseAllow(f *testing.F) {
	for _, s := range []string{
		"example.com", "Example.COM.", "example.com:8443", "example.com:*", "*.example.com", "*.example.com:22",
		"10.1.2.3", "10.1.2.3:8080", "10.1.2.3:*", "fd00::1", "[fd00::1]", "[fd00::1]:8443", "[fd00::1]:*",
		"10.0.0.0/8", "fc00::/7", "2001:db8::/32", "64:ff9b::a01:200/120", "2002:a00::/24",
		"", "*", "*.", "**.example.com", "a*.example.com", "http://example.com", "example.com/path",
		"exa mple.com", "fe80::1%eth0", "[fe80::1%25eth0]:443", "example.com:0", "example.com:65536",
		"example.com:-1", "example.com:", "[fd00::1]:", "0x7f.1", "2130706433", "::ffff:10.1.2.3",
		"127.0.0.0/8", "64:ff9b::7f00:1", "2002:7f00:1::", "example.com\n*.example.org:443\n10.0.0.0/8",
		"a.b.c.d.e.f.example:65535", "under_score.example:1", "xn--bcher-kva.example",
		"64:ff9b::7f00:0/104", "2002:7f00::/24", "::/104", "2002:a9fe:a9fe::/48",
		"*." + strings.Repeat("a.", 125) + "com",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		raws := strings.Split(input, "\n")
		list, err := Parse(raws)
		var bad []string
		for _, raw := range raws {
			e, perr := parseEntry(raw)
			if perr != nil {
				bad = append(bad, raw)
				continue
			}
			checkEntry(t, raw, e)
		}
		if len(bad) == 0 {
			if err != nil {
				t.Fatalf("Parse(%q) = %v, yet every entry parses alone", raws, err)
			}
			if len(list.entries) != len(raws) {
				t.Fatalf("Parse(%q) kept %d entries, want %d", raws, len(list.entries), len(raws))
			}
			for i, e := range list.entries {
				if e.raw != raws[i] {
					t.Fatalf("entry %d keeps raw %q, want %q", i, e.raw, raws[i])
				}
			}
			return
		}
		if err == nil {
			t.Fatalf("Parse(%q) accepted the bad entries %q", raws, bad)
		}
		if !errors.Is(err, ErrInvalidEntry) {
			t.Fatalf("Parse(%q) error %v does not wrap ErrInvalidEntry", raws, err)
		}
		if len(list.entries) != 0 {
			t.Fatalf("Parse(%q) failed but returned %d entries", raws, len(list.entries))
		}
		// The message is built once: built per entry, thousands of bad
		// entries took the engine's worker past its 10 s per input.
		msg := err.Error()
		for _, raw := range bad {
			if !strings.Contains(msg, strconv.Quote(raw)) {
				t.Fatalf("Parse(%q) error %q does not name the entry %q", raws, msg, raw)
			}
		}
	})
}

// checkEntry checks the meaning of one accepted entry against a list that
// holds it alone.
func checkEntry(t *testing.T, raw string, e entry) {
	t.Helper()
	if e.port != 0 && e.port != anyPort && (e.port < 1 || e.port > 65535) {
		t.Fatalf("%q: port %d out of range", raw, e.port)
	}
	switch {
	case strings.Contains(raw, "%"):
		t.Fatalf("%q: accepted an IPv6 zone or an escape", raw)
	case strings.HasSuffix(raw, ":") && (strings.HasPrefix(raw, "[") || strings.Count(raw, ":") == 1):
		t.Fatalf("%q: accepted an empty port", raw)
	}
	one := List{entries: []entry{e}}
	in, out := portsOf(e)

	// The canonical spelling reads back as the same entry.
	canon := canonical(e)
	back, err := parseEntry(canon)
	if err != nil {
		t.Fatalf("%q: its canonical spelling %q is refused: %v", raw, canon, err)
	}
	back.raw = e.raw
	if back != e {
		t.Fatalf("%q: canonical %q reads back as %+v, want %+v", raw, canon, back, e)
	}

	switch e.kind {
	case kindHost, kindSuffix:
		if e.name != strings.ToLower(e.name) || strings.HasSuffix(e.name, ".") {
			t.Fatalf("%q: name %q is not normalized", raw, e.name)
		}
		host := e.name
		if e.kind == kindSuffix {
			if !strings.HasPrefix(e.name, ".") {
				t.Fatalf("%q: suffix %q lacks its leading dot", raw, e.name)
			}
			parent := e.name[1:]
			for _, p := range in {
				if _, ok := one.hostEntry(parent, p); ok {
					t.Fatalf("%q allows the parent domain %s:%d", raw, parent, p)
				}
				if _, ok := one.hostEntry("x"+parent, p); ok {
					t.Fatalf("%q allows x%s:%d, which is not a subdomain", raw, parent, p)
				}
			}
			host = "x" + e.name
		} else {
			for _, p := range in {
				if _, ok := one.hostEntry("x."+e.name, p); ok {
					t.Fatalf("%q allows the subdomain x.%s:%d", raw, e.name, p)
				}
			}
		}
		for _, p := range in {
			// A client asking for the host gets a target this entry allows.
			tg, err := ParseTarget(net.JoinHostPort(host, strconv.Itoa(int(p))), 0)
			if err != nil {
				t.Fatalf("%q: a client cannot name %s:%d: %v", raw, host, p, err)
			}
			if tg.IsAddr() || tg.name != host {
				t.Fatalf("%q: %s:%d parses as %v (name %q), not as the host", raw, host, p, tg, tg.name)
			}
			if _, ok := one.hostEntry(tg.name, tg.port); !ok {
				t.Fatalf("%q does not allow %s:%d", raw, host, p)
			}
		}
		for _, p := range out {
			if _, ok := one.hostEntry(host, p); ok {
				t.Fatalf("%q allows %s on port %d", raw, host, p)
			}
		}
		if _, ok := one.addrEntry(netip.MustParseAddr("93.184.216.34"), 443); ok {
			t.Fatalf("%q (a name) allows an address", raw)
		}
	case kindAddr:
		ip := e.prefix.Addr()
		if e.prefix.Bits() != ip.BitLen() || ip.Zone() != "" || ip.Is4In6() {
			t.Fatalf("%q: address entry holds %v", raw, e.prefix)
		}
		if v := classify(ip); v.rule != nil && v.rule.never {
			t.Fatalf("%q: accepted %s, which is in %s (%s)", raw, ip, v.rule.prefix, v.rule.what)
		}
		for _, p := range in {
			tg, err := ParseTarget(net.JoinHostPort(ip.String(), strconv.Itoa(int(p))), 0)
			if err != nil || tg.addr != ip {
				t.Fatalf("%q: a client naming %s:%d gets %v, %v", raw, ip, p, tg, err)
			}
			if _, ok := one.addrEntry(ip, p); !ok {
				t.Fatalf("%q does not allow %s:%d", raw, ip, p)
			}
		}
		for _, p := range out {
			if _, ok := one.addrEntry(ip, p); ok {
				t.Fatalf("%q allows %s on port %d", raw, ip, p)
			}
		}
		if next := ip.Next(); next.IsValid() && !sameEmbedded(ip, next) {
			if _, ok := one.addrEntry(next, in[0]); ok {
				t.Fatalf("%q allows the next address %s", raw, next)
			}
		}
	case kindPrefix:
		p := e.prefix
		if e.port != anyPort || p != p.Masked() || p.Bits() == 0 || p.Addr().Is4In6() {
			t.Fatalf("%q: CIDR entry holds %v port %d", raw, p, e.port)
		}
		first, last := p.Addr(), lastAddr(p)
		for _, ip := range []netip.Addr{first, last} {
			if _, ok := one.addrEntry(ip, 1); !ok {
				t.Fatalf("%q does not allow %s", raw, ip)
			}
		}
		if next := last.Next(); next.IsValid() && !sameEmbedded(last, next) {
			if _, ok := one.addrEntry(next, 443); ok {
				t.Fatalf("%q allows %s, past its end", raw, next)
			}
		}
		// A CIDR whose first and last addresses fall in the same
		// never-reachable rule lies wholly inside that rule's range.
		vf, vl := classify(first), classify(last)
		if vf.rule != nil && vf.rule == vl.rule && vf.rule.never {
			t.Fatalf("%q: accepted a range wholly inside %s (%s), which the proxy never connects to",
				raw, vf.rule.prefix, vf.rule.what)
		}
	default:
		t.Fatalf("%q: unknown kind %d", raw, e.kind)
	}
}

// portsOf returns ports the entry must allow and ports it must not.
func portsOf(e entry) (in, out []uint16) {
	switch e.port {
	case anyPort:
		return []uint16{1, 80, 443, 65535}, nil
	case 0:
		return []uint16{80, 443}, []uint16{1, 79, 81, 442, 444, 8080, 65535}
	}
	in = []uint16{uint16(e.port)}
	for _, p := range []int{e.port - 1, e.port + 1} {
		if p >= 1 && p <= 65535 {
			out = append(out, uint16(p))
		}
	}
	return in, out
}

// canonical spells e the way the documentation does.
func canonical(e entry) string {
	port := ""
	switch e.port {
	case 0:
	case anyPort:
		port = ":*"
	default:
		port = ":" + strconv.Itoa(e.port)
	}
	switch e.kind {
	case kindHost:
		return e.name + port
	case kindSuffix:
		return "*" + e.name + port
	case kindAddr:
		ip := e.prefix.Addr()
		if ip.Is6() && port != "" {
			return "[" + ip.String() + "]" + port
		}
		return ip.String() + port
	default:
		return e.prefix.String()
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	ip, _ := netip.AddrFromSlice(b)
	return ip
}

// sameEmbedded reports whether a and b are one address for the allow list:
// an IPv6 form carrying an IPv4 address and that IPv4 address.
func sameEmbedded(a, b netip.Addr) bool {
	va, oka := embeddedV4(a)
	vb, okb := embeddedV4(b)
	return (oka && (va == b || (okb && va == vb))) || (okb && vb == a)
}

// FuzzParseTarget checks that every target ParseTarget accepts is
// well-formed (a port from 1 to 65535; a normalized host name that is not
// an address in any spelling, or an unmapped address without a zone), that
// its String form parses back to the same target, that a default port never
// overrides an explicit one, and that the allow-list entry the proxy
// suggests for it (suggest) is accepted and allows it, unless the address is
// one the proxy never connects to.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{
		"example.com:443", "Example.COM.:443", "example.com", "127.0.0.1:80", "2130706433:80", "0x7f.1:80",
		"0177.0.0.1:80", "127.1:80", "[::1]:443", "[::ffff:127.0.0.1]:443", "[fd00:ec2::254]", "[fe80::1%25eth0]:80",
		"example.com:0", "example.com:65536", ":80", "::1:80", "[127.0.0.1]:80", "[]", "[", "a.0x:1", "1.2.3.4.:5",
		"[64:ff9b::7f00:1]:80", "under_score.example:80", "exa%6dple.com:80", "1e1:80", "0x:80", "08:80",
	} {
		f.Add(s, uint16(0))
		f.Add(s, uint16(443))
	}
	f.Fuzz(func(t *testing.T, hostport string, defaultPort uint16) {
		tg, err := ParseTarget(hostport, defaultPort)
		if err != nil {
			if tg != (Target{}) {
				t.Fatalf("ParseTarget(%q) failed but returned %+v", hostport, tg)
			}
			return
		}
		if tg.port == 0 {
			t.Fatalf("ParseTarget(%q) = port 0", hostport)
		}
		if tg.IsAddr() {
			if tg.name != "" || tg.addr.Zone() != "" || tg.addr.Is4In6() {
				t.Fatalf("ParseTarget(%q) = addr %#v, name %q", hostport, tg.addr, tg.name)
			}
		} else {
			n := tg.name
			if n == "" || n != strings.ToLower(n) || strings.HasSuffix(n, ".") || checkHostname(n) != nil {
				t.Fatalf("ParseTarget(%q) = name %q, not a normalized host name", hostport, n)
			}
			if _, err := netip.ParseAddr(n); err == nil {
				t.Fatalf("ParseTarget(%q) = name %q, which is an IP address", hostport, n)
			}
			if _, ok := parseLegacyIPv4(n); ok || endsInNumber(n) {
				t.Fatalf("ParseTarget(%q) = name %q, which is numeric", hostport, n)
			}
		}
		s := tg.String()
		for _, dp := range []uint16{0, defaultPort, 8080} {
			back, err := ParseTarget(s, dp)
			if err != nil || back != tg {
				t.Fatalf("ParseTarget(%q) = %v; ParseTarget(%q, %d) = %+v, %v", hostport, tg, s, dp, back, err)
			}
		}
		if defaultPort == 0 {
			if other, err := ParseTarget(hostport, 8080); err != nil || other != tg {
				t.Fatalf("ParseTarget(%q, 8080) = %+v, %v; want %+v as without a default", hostport, other, err, tg)
			}
		}

		// The fix the proxy prints must work.
		sug := Suggest(tg.Host(), tg.port)
		list, err := Parse([]string{sug})
		if tg.IsAddr() {
			if v := classify(tg.addr); v.rule != nil && v.rule.never {
				if err == nil {
					t.Fatalf("entry %q for %s, which is in %s, was accepted", sug, tg.addr, v.rule.prefix)
				}
				return
			}
		}
		if err != nil {
			t.Fatalf("the suggested entry %q for %v is refused: %v", sug, tg, err)
		}
		ok := false
		if tg.IsAddr() {
			_, ok = list.addrEntry(tg.addr, tg.port)
		} else {
			_, ok = list.hostEntry(tg.name, tg.port)
		}
		if !ok {
			t.Fatalf("the suggested entry %q does not allow %v", sug, tg)
		}
	})
}

// FuzzClassify checks classify against oracles that do not use its tables:
// net/netip's own predicates, and the IPv4 ranges written out byte by byte.
// An IPv4 address and every IPv6 form carrying it (IPv4-mapped,
// IPv4-compatible, NAT64, 6to4) get the same verdict, and a zone changes
// nothing.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"93.184.216.34", "127.0.0.1", "169.254.169.254", "10.1.2.3", "0.0.0.1",
		"255.255.255.255", "::1", "fe80::1", "ff01::1", "fd00:ec2::254", "64:ff9b::7f00:1", "2002:a9fe:a9fe::1",
		"::ffff:10.0.0.1", "::7f00:1", "2606:4700::1111", "fc00::1"} {
		b := netip.MustParseAddr(s).As16()
		f.Add(b[:], "")
	}
	f.Add([]byte{127, 0, 0, 1}, "eth0")
	f.Fuzz(func(t *testing.T, b []byte, zone string) {
		if len(b) >= 16 {
			ip := netip.AddrFrom16([16]byte(b[:16]))
			checkOracle(t, ip)
			if !ip.Is4In6() && !strings.ContainsAny(zone, "%\x00") {
				if z := ip.WithZone(zone); classify(z) != classify(ip) {
					t.Fatalf("classify(%s) differs from classify(%s)", z, ip)
				}
			}
		}
		if len(b) < 4 {
			return
		}
		v4 := netip.AddrFrom4([4]byte(b[:4]))
		checkOracle(t, v4)
		want := classify(v4)
		never, private := v4Ranges([4]byte(b[:4]))
		if got := want.rule != nil && want.rule.never; got != never {
			t.Fatalf("classify(%s): never = %v, want %v", v4, got, never)
		}
		if got := want.rule != nil && !want.rule.never; got != private {
			t.Fatalf("classify(%s): private = %v, want %v", v4, got, private)
		}
		var rest [10]byte
		copy(rest[:], b[min(4, len(b)):])
		a := v4.As4()
		forms := map[string]netip.Addr{
			"mapped":     netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: a[0], 13: a[1], 14: a[2], 15: a[3]}),
			"compatible": netip.AddrFrom16([16]byte{12: a[0], 13: a[1], 14: a[2], 15: a[3]}),
			"NAT64":      netip.AddrFrom16([16]byte{0: 0x00, 1: 0x64, 2: 0xff, 3: 0x9b, 12: a[0], 13: a[1], 14: a[2], 15: a[3]}),
			"6to4": netip.AddrFrom16([16]byte{0: 0x20, 1: 0x02, 2: a[0], 3: a[1], 4: a[2], 5: a[3],
				6: rest[0], 7: rest[1], 8: rest[2], 9: rest[3], 10: rest[4], 11: rest[5], 12: rest[6], 13: rest[7], 14: rest[8], 15: rest[9]}),
		}
		for form, ip := range forms {
			got := classify(ip)
			if form == "compatible" && (ip == netip.IPv6Unspecified() || ip == netip.IPv6Loopback()) {
				// :: and ::1 are judged as themselves, and never reachable.
				if got.rule == nil || !got.rule.never {
					t.Fatalf("classify(%s) = %+v", ip, got)
				}
				continue
			}
			if got.rule != want.rule {
				t.Fatalf("classify(%s), the %s form of %s, = %+v, want the rule of %s: %+v", ip, form, v4, got.rule, v4, want.rule)
			}
			if got.rule != nil && got.embedded != v4 {
				t.Fatalf("classify(%s) names the embedded address %s, want %s", ip, got.embedded, v4)
			}
			if got.rule != nil && !strings.Contains(describeAddr(ip, got), v4.String()) {
				t.Fatalf("describeAddr(%s) = %q does not name %s", ip, describeAddr(ip, got), v4)
			}
		}
	})
}

// checkOracle checks classify(ip) against net/netip's predicates.
func checkOracle(t *testing.T, ip netip.Addr) {
	t.Helper()
	v := classify(ip)
	never := v.rule != nil && v.rule.never
	for name, is := range map[string]func(netip.Addr) bool{
		"loopback":                  netip.Addr.IsLoopback,
		"link-local unicast":        netip.Addr.IsLinkLocalUnicast,
		"link-local multicast":      netip.Addr.IsLinkLocalMulticast,
		"interface-local multicast": netip.Addr.IsInterfaceLocalMulticast,
		"multicast":                 netip.Addr.IsMulticast,
		"unspecified":               netip.Addr.IsUnspecified,
		"not global unicast":        func(a netip.Addr) bool { return !a.IsGlobalUnicast() },
	} {
		if is(ip) && !never {
			t.Fatalf("%s is %s, but classify says %s", ip, name, verdictString(v))
		}
	}
	if ip.IsPrivate() && v.rule == nil {
		t.Fatalf("%s is private, but classify says public", ip)
	}
}

func verdictString(v Verdict) string {
	if v.rule == nil {
		return "public"
	}
	return fmt.Sprintf("%s (%s, never=%v)", v.rule.reason, v.rule.prefix, v.rule.never)
}

// v4Ranges is the refused-range table for IPv4, written out independently
// of classify's: never reachable, or private (reachable when named).
func v4Ranges(a [4]byte) (never, private bool) {
	switch {
	case a[0] == 0, a[0] == 127, a[0] >= 224, a[0] == 169 && a[1] == 254, a == [4]byte{168, 63, 129, 16}:
		return true, false
	case a[0] == 10, a[0] == 172 && a[1]&0xf0 == 16, a[0] == 192 && a[1] == 168,
		a[0] == 100 && a[1]&0xc0 == 64, a[0] == 198 && a[1]&0xfe == 18:
		return false, true
	}
	return false, false
}
