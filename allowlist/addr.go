package allowlist

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Address classes: the reason codes of the refused ranges. A proxy puts
// them in its X-Sandbox-Refusal header and in the "reason" field of audit
// lines; they are stable.
const (
	ReasonPrivate     = "private"     // private range, not named by an address entry
	ReasonUnspecified = "unspecified" // 0.0.0.0/8, ::
	ReasonLoopback    = "loopback"    // 127.0.0.0/8, ::1
	ReasonLinkLocal   = "link-local"  // 169.254.0.0/16, fe80::/10
	ReasonMetadata    = "metadata"    // cloud metadata endpoints
	ReasonMulticast   = "multicast"   // 224.0.0.0/4, ff00::/8
	ReasonReserved    = "reserved"    // 240.0.0.0/4
	ReasonBroadcast   = "broadcast"   // 255.255.255.255
)

// rangeRule is one row of the refused-range table.
type rangeRule struct {
	prefix netip.Prefix
	never  bool   // true: no allow-list entry can make it reachable
	reason string // reason code
	what   string // for people
}

func mustRule(cidr string, never bool, reason, what string) rangeRule {
	return rangeRule{prefix: netip.MustParsePrefix(cidr), never: never, reason: reason, what: what}
}

// neverV4 and neverV6 are checked before the private tables; the first match
// wins, so the more specific rows come first. These tables are constant.
var (
	neverV4 = []rangeRule{
		mustRule("169.254.169.254/32", true, ReasonMetadata, "cloud metadata endpoint"),
		mustRule("168.63.129.16/32", true, ReasonMetadata, "Azure platform endpoint (wireserver)"),
		mustRule("255.255.255.255/32", true, ReasonBroadcast, "limited broadcast"),
		mustRule("0.0.0.0/8", true, ReasonUnspecified, "unspecified / this network"),
		mustRule("127.0.0.0/8", true, ReasonLoopback, "loopback"),
		mustRule("169.254.0.0/16", true, ReasonLinkLocal, "link-local"),
		mustRule("224.0.0.0/4", true, ReasonMulticast, "multicast"),
		mustRule("240.0.0.0/4", true, ReasonReserved, "reserved (class E)"),
	}
	privateV4 = []rangeRule{
		mustRule("10.0.0.0/8", false, ReasonPrivate, "private network, RFC 1918"),
		mustRule("172.16.0.0/12", false, ReasonPrivate, "private network, RFC 1918"),
		mustRule("192.168.0.0/16", false, ReasonPrivate, "private network, RFC 1918"),
		mustRule("100.64.0.0/10", false, ReasonPrivate, "shared address space (carrier-grade NAT), RFC 6598"),
		mustRule("198.18.0.0/15", false, ReasonPrivate, "benchmarking network, RFC 2544"),
	}
	neverV6 = []rangeRule{
		mustRule("::/128", true, ReasonUnspecified, "unspecified"),
		mustRule("::1/128", true, ReasonLoopback, "loopback"),
		mustRule("fd00:ec2::254/128", true, ReasonMetadata, "cloud metadata endpoint (AWS IPv6)"),
		mustRule("fe80::/10", true, ReasonLinkLocal, "link-local"),
		mustRule("ff00::/8", true, ReasonMulticast, "multicast"),
	}
	privateV6 = []rangeRule{
		mustRule("fc00::/7", false, ReasonPrivate, "unique local address, RFC 4193"),
		// Where a local-use NAT64 prefix puts the IPv4 address depends on
		// the length the operator chose, so it cannot be judged by it.
		mustRule("64:ff9b:1::/48", false, ReasonPrivate, "local-use NAT64, RFC 8215 (the IPv4 address it carries cannot be told)"),
	}
	// IPv6 forms that carry an IPv4 address, judged by that address.
	nat64Prefix  = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour    = netip.MustParsePrefix("2002::/16")
	v4Compatible = netip.MustParsePrefix("::/96")
)

// Verdict is the classification of one address: an ordinary public
// address (the zero Verdict), a private range that an address or CIDR
// entry can make reachable, or a range no entry can.
type Verdict struct {
	rule     *rangeRule // nil: an ordinary public address
	embedded netip.Addr // valid when the rule was found through an IPv4 address inside an IPv6 one
}

// Classify returns the refused range ip falls in; see classify.
func Classify(ip netip.Addr) Verdict { return classify(ip) }

// Public reports whether the address lies in no refused range.
func (v Verdict) Public() bool { return v.rule == nil }

// Never reports whether no allow-list entry can make the address
// reachable (loopback, link-local, metadata, multicast, ...).
func (v Verdict) Never() bool { return v.rule != nil && v.rule.never }

// Reason is the range's reason code (Reason*); "" for a public address.
func (v Verdict) Reason() string {
	if v.rule == nil {
		return ""
	}
	return v.rule.reason
}

// Range is the refused range the address lies in; the zero Prefix for a
// public address.
func (v Verdict) Range() netip.Prefix {
	if v.rule == nil {
		return netip.Prefix{}
	}
	return v.rule.prefix
}

// What names the range for people; "" for a public address.
func (v Verdict) What() string {
	if v.rule == nil {
		return ""
	}
	return v.rule.what
}

// Describe names ip, which v classifies, for people, mentioning the IPv4
// address it carries.
func (v Verdict) Describe(ip netip.Addr) string { return describeAddr(ip, v) }

// classify returns the refused range ip falls in, judging IPv4-mapped,
// IPv4-compatible, NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses by the
// IPv4 address inside them. An address with a zone is never valid as a
// destination; callers reject zones before calling classify.
func classify(ip netip.Addr) Verdict {
	if ip.Is4In6() {
		v := classify(ip.Unmap())
		if !v.embedded.IsValid() {
			v.embedded = ip.Unmap()
		}
		return v
	}
	if ip.Is4() {
		for i := range neverV4 {
			if neverV4[i].prefix.Contains(ip) {
				return Verdict{rule: &neverV4[i]}
			}
		}
		for i := range privateV4 {
			if privateV4[i].prefix.Contains(ip) {
				return Verdict{rule: &privateV4[i]}
			}
		}
		return Verdict{}
	}
	ip = ip.WithZone("")
	for i := range neverV6 {
		if neverV6[i].prefix.Contains(ip) {
			return Verdict{rule: &neverV6[i]}
		}
	}
	if v4, ok := embeddedV4(ip); ok {
		v := classify(v4)
		v.embedded = v4
		return v
	}
	for i := range privateV6 {
		if privateV6[i].prefix.Contains(ip) {
			return Verdict{rule: &privateV6[i]}
		}
	}
	return Verdict{}
}

// embeddedV4 extracts the IPv4 address carried by a NAT64, 6to4 or
// IPv4-compatible IPv6 address.
func embeddedV4(ip netip.Addr) (netip.Addr, bool) {
	b := ip.As16()
	switch {
	case nat64Prefix.Contains(ip), v4Compatible.Contains(ip):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// embeddedV4Prefix returns the IPv4 range carried by the addresses of p
// when p lies wholly inside the NAT64, IPv4-compatible or 6to4 range, whose
// addresses classify judges by that IPv4 address.
func embeddedV4Prefix(p netip.Prefix) (netip.Prefix, bool) {
	var bits int
	switch a := p.Addr(); {
	case p.Bits() >= nat64Prefix.Bits() && (nat64Prefix.Contains(a) || v4Compatible.Contains(a)):
		bits = p.Bits() - nat64Prefix.Bits()
	case p.Bits() >= sixToFour.Bits() && sixToFour.Contains(a):
		bits = min(p.Bits()-sixToFour.Bits(), 32)
	default:
		return netip.Prefix{}, false
	}
	v4, _ := embeddedV4(p.Addr())
	return netip.PrefixFrom(v4, bits).Masked(), true
}

// Target is a parsed destination: a host name or an address, and a port.
// Only ParseTarget makes one; the zero Target names nothing.
type Target struct {
	name string     // normalized host name (lowercase, no trailing dot); empty for addresses
	addr netip.Addr // the address a literal denotes, in any accepted spelling; unmapped
	port uint16
}

// IsAddr reports whether the target is an address literal, not a name.
func (t Target) IsAddr() bool { return t.addr.IsValid() }

// Name is the normalized host name (lowercase, no trailing dot); "" for
// an address.
func (t Target) Name() string { return t.name }

// Addr is the address the target's literal denotes, unmapped; invalid for
// a name.
func (t Target) Addr() netip.Addr { return t.addr }

// Port is the target's port, from 1 to 65535.
func (t Target) Port() uint16 { return t.port }

// Host returns the host part as people would write it (no brackets).
func (t Target) Host() string {
	if t.IsAddr() {
		return t.addr.String()
	}
	return t.name
}

func (t Target) String() string {
	return net.JoinHostPort(t.Host(), strconv.Itoa(int(t.port)))
}

// ParseTarget parses "host:port" (or, when defaultPort is not 0, "host") as
// sent by a client. Every spelling of an IPv4 address that inet_aton(3)
// accepts (decimal 2130706433, octal 0177.0.0.1, hex 0x7f.1, short 127.1) is
// turned into the address it denotes; a host whose last label is numeric but
// that does not parse as such an address is an error, as is anything that is
// neither a valid host name nor an address. The error text is for people.
func ParseTarget(hostport string, defaultPort uint16) (Target, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		if defaultPort == 0 {
			return Target{}, fmt.Errorf("%q has no valid port", hostport)
		}
		switch {
		case strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]"):
			host = hostport[1 : len(hostport)-1]
		case !strings.Contains(hostport, ":"):
			host = hostport
		default:
			return Target{}, fmt.Errorf("%q is not host:port", hostport)
		}
		portStr = strconv.Itoa(int(defaultPort))
	}
	if strings.HasPrefix(hostport, "[") && !strings.Contains(host, ":") {
		return Target{}, fmt.Errorf("%q: brackets are only for IPv6 addresses", hostport)
	}
	port, err := parsePort(portStr)
	if err != nil {
		return Target{}, err
	}
	t := Target{port: port}
	t.name, t.addr, err = parseHost(host)
	if err != nil {
		return Target{}, err
	}
	return t, nil
}

func parsePort(s string) (uint16, error) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return uint16(n), nil
}

// parseHost returns either a normalized host name or the address the host
// denotes. Addresses are returned unmapped (::ffff:a.b.c.d becomes a.b.c.d),
// since that is the address the kernel connects to.
func parseHost(host string) (string, netip.Addr, error) {
	if host == "" {
		return "", netip.Addr{}, fmt.Errorf("empty host")
	}
	if strings.Contains(host, "%") {
		return "", netip.Addr{}, fmt.Errorf("host %q: zones and escapes are not accepted", host)
	}
	if strings.Contains(host, ":") {
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is6() {
			return "", netip.Addr{}, fmt.Errorf("host %q is not a valid IPv6 address", host)
		}
		return "", ip.Unmap(), nil
	}
	h := strings.ToLower(host)
	h = strings.TrimSuffix(h, ".") // one trailing dot: the fully qualified spelling
	if h == "" {
		return "", netip.Addr{}, fmt.Errorf("host %q is empty", host)
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		return "", ip, nil
	}
	if endsInNumber(h) {
		ip, ok := parseLegacyIPv4(h)
		if !ok {
			return "", netip.Addr{}, fmt.Errorf("host %q looks like a numeric IPv4 address but does not parse as one", host)
		}
		return "", ip, nil
	}
	if err := checkHostname(h); err != nil {
		return "", netip.Addr{}, fmt.Errorf("host %q: %w", host, err)
	}
	return h, netip.Addr{}, nil
}

// endsInNumber reports whether the last label of h is a decimal or 0x-hex
// number; such a host is an IPv4 address to inet_aton and to browsers
// (WHATWG URL "ends in a number"), never a DNS name.
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if strings.TrimLeft(last, "0123456789") == "" {
		return true
	}
	if strings.HasPrefix(last, "0x") {
		return strings.TrimLeft(last[2:], "0123456789abcdef") == ""
	}
	return false
}

// parseLegacyIPv4 parses the forms inet_aton(3) accepts: one to four parts,
// each decimal, octal (leading 0) or hex (leading 0x); the last part fills
// the remaining bytes. It is stricter than inet_aton in refusing empty parts
// and a bare "0x".
func parseLegacyIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x"):
			base, digits = 16, p[2:]
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		if digits == "" || len(digits) > 32 {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(digits, base, 64)
		if err != nil || strings.ContainsAny(digits, "+-_") {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// maxHostLen is the longest host name, in bytes, without a trailing dot.
const maxHostLen = 253

// checkHostname accepts lowercase LDH labels (plus "_", which real DNS
// names use), each 1 to 63 bytes, 253 bytes in all.
func checkHostname(h string) error {
	if len(h) > maxHostLen {
		return fmt.Errorf("longer than %d bytes", maxHostLen)
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("empty or over-long label")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			case c >= 0x80:
				return fmt.Errorf("non-ASCII name: use its punycode (xn--) form")
			default:
				return fmt.Errorf("character %q not allowed in a host name", c)
			}
		}
	}
	return nil
}
