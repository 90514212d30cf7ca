// Package allowlist is the syntax of egress allow-list entries and the
// address classes an egress decision rests on: which ranges no entry can
// make reachable (loopback, link-local, cloud metadata, ...), which only
// an address or CIDR entry can (private ranges), and how a client's
// host:port is read (every inet_aton spelling of an IPv4 address is the
// address it denotes).
//
// It is pure: no I/O, no DNS, no dialing. policy validates allow-lists
// with it before anything touches the host, and proxy decides connections
// with it, so both read an entry the same way. Non-guarantee: an entry
// naming a host says nothing about the addresses it resolves to; the
// proxy judges every resolved address again with Classify.
package allowlist

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// ErrInvalidEntry is wrapped by every error Parse returns for an entry
// it cannot accept.
var ErrInvalidEntry = errors.New("invalid allow-list entry")

// EntryError is one entry Parse refuses: the entry as given and why.
type EntryError struct{ Entry, Why string }

func (e *EntryError) Error() string { return "allowlist: " + e.Detail() }

// Detail is the error without the package's name, for a caller that
// names the flag or key its own way.
func (e *EntryError) Detail() string {
	return fmt.Sprintf("%s %q: %s", ErrInvalidEntry, e.Entry, e.Why)
}

// Is matches ErrInvalidEntry.
func (e *EntryError) Is(target error) bool { return target == ErrInvalidEntry }

// List is a validated allow list. The zero value allows nothing. Only
// Parse makes a non-empty one.
type List struct {
	entries []entry
}

type entryKind int

const (
	kindHost   entryKind = iota // example.com
	kindSuffix                  // *.example.com: subdomains only
	kindAddr                    // 10.1.2.3, fd00::1
	kindPrefix                  // 10.0.0.0/8: every port
)

// portSpec: 0 means the web ports 80 and 443; anyPort means every port;
// anything else is that one port.
const anyPort = -1

type entry struct {
	raw    string
	kind   entryKind
	name   string       // kindHost: the name; kindSuffix: ".example.com"
	prefix netip.Prefix // kindAddr (a /32 or /128) and kindPrefix
	port   int
}

func (e entry) portOK(port uint16) bool {
	switch e.port {
	case anyPort:
		return true
	case 0:
		return port == 80 || port == 443
	default:
		return int(port) == e.port
	}
}

// Parse validates allow-list entries:
//
//   - "host": that host on ports 80 and 443
//   - "host:port", "host:*": that port, every port
//   - "*.domain": every subdomain of domain (not domain itself), ports 80 and 443;
//     "*.domain:port" and "*.domain:*" as above
//   - an IP literal ("10.1.2.3", "fd00::1", "[fd00::1]:8443", "10.1.2.3:*"):
//     that address, with the same port rules as a host
//   - a CIDR ("10.0.0.0/8"): every address in it, on every port
//
// Host names are case-insensitive and may carry one trailing dot. Only
// address and CIDR entries make private ranges (10/8, 172.16/12, 192.168/16,
// 100.64/10, 198.18/15, fc00::/7) reachable. Entries naming a range the proxy
// never connects to (loopback, link-local, metadata, multicast, ...),
// including NAT64, 6to4 and IPv4-compatible CIDRs that carry only such IPv4
// addresses, non-standard IPv4 spellings (0x7f.1, 2130706433), IPv4-mapped
// IPv6 forms, IPv6 zones (fe80::1%eth0), ports outside 1..65535 or empty,
// URLs and paths, '*' anywhere but as the whole first label or the port, a
// bare "*", a *.domain too long to have a subdomain, and CIDRs with host bits
// set are refused. No entries is valid and allows nothing.
//
// Every error wraps ErrInvalidEntry, names the entry and says what is
// expected instead; the errors of all bad entries are joined.
func Parse(entries []string) (List, error) {
	var (
		list List
		errs []error
	)
	for _, raw := range entries {
		e, err := parseEntry(raw)
		if err != nil {
			errs = append(errs, &EntryError{Entry: raw, Why: err.Error()})
			continue
		}
		list.entries = append(list.entries, e)
	}
	if len(errs) > 0 {
		return List{}, errors.Join(errs...)
	}
	return list, nil
}

// parseEntry reads one entry: a CIDR, or a host part and an optional
// port (see Parse).
func parseEntry(raw string) (entry, error) {
	e := entry{raw: raw}
	if raw == "" {
		return e, fmt.Errorf("empty; want a host, host:port, *.domain, an IP address or a CIDR")
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return e, fmt.Errorf("contains whitespace or control characters")
	}
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		host, _, _ := strings.Cut(rest, "/")
		return e, fmt.Errorf("a URL is not an entry: write its host, as host or host:port%s", didYouMean(host))
	}
	if before, _, ok := strings.Cut(raw, "/"); ok {
		if _, err := netip.ParseAddr(before); err != nil {
			return e, fmt.Errorf("'/' is only accepted in a CIDR (a.b.c.d/n or x::/n): an entry is a host, host:port or address, with no path%s",
				didYouMean(before))
		}
		return parsePrefixEntry(raw)
	}
	host, port, err := splitEntryPort(raw)
	if err != nil {
		return e, err
	}
	e.port = port
	if strings.Contains(host, ":") { // IPv6
		return v6Entry(e, host)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return addrEntry(e, ip)
	}
	return nameEntry(e, host)
}

// splitEntryPort splits raw (no '/') into its host part and its port: 0
// for none (the web ports), anyPort for '*', else 1 to 65535.
func splitEntryPort(raw string) (string, int, error) {
	host, portStr, hasPort := raw, "", false
	switch {
	case strings.HasPrefix(raw, "["):
		h, p, err := net.SplitHostPort(raw)
		if err != nil {
			if !strings.HasSuffix(raw, "]") {
				return "", 0, fmt.Errorf("bracketed IPv6 must be [addr] or [addr]:port")
			}
			h = raw[1 : len(raw)-1]
		} else {
			hasPort = true
		}
		host, portStr = h, p
		if !strings.Contains(host, ":") {
			return "", 0, fmt.Errorf("brackets are only for IPv6 addresses")
		}
	case strings.Count(raw, ":") == 1:
		i := strings.LastIndexByte(raw, ':')
		host, portStr, hasPort = raw[:i], raw[i+1:], true
	}
	switch {
	case !hasPort:
		return host, 0, nil
	case portStr == "":
		return "", 0, fmt.Errorf("empty port after ':'; want a number from 1 to 65535, or * for every port")
	case portStr == "*":
		return host, anyPort, nil
	}
	p, err := parsePort(portStr)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: want a number from 1 to 65535, or * for every port", portStr)
	}
	return host, int(p), nil
}

// v6Entry reads an IPv6 host part; a zone is refused.
func v6Entry(e entry, host string) (entry, error) {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return e, fmt.Errorf("%q is not a valid IPv6 address (a port goes after brackets: [addr]:port)", host)
	}
	if z := ip.Zone(); z != "" {
		msg := fmt.Sprintf("IPv6 zone %q is not accepted: an entry names an address, not an interface; write %s", "%"+z, ip.WithZone(""))
		if _, err := addrEntry(e, ip.WithZone("")); err != nil {
			msg = fmt.Sprintf("IPv6 zone %q is not accepted, and %v", "%"+z, err)
		}
		return e, errors.New(msg)
	}
	return addrEntry(e, ip)
}

// nameEntry reads a host part that is not an address: a host name, or
// *.domain for its subdomains.
func nameEntry(e entry, host string) (entry, error) {
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "" {
		return e, fmt.Errorf("empty host")
	}
	if strings.HasPrefix(name, "*.") {
		e.kind, name = kindSuffix, name[2:]
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		// RFC 6761: localhost names loopback whatever DNS says, so it is
		// refused here like 127.0.0.1, not only later at dial time.
		return e, fmt.Errorf("%s is loopback (RFC 6761: 127.0.0.1 and ::1), which the proxy never connects to: the host's own services stay out of the sandbox's reach", host)
	}
	if strings.Contains(name, "*") {
		if name == "*" && e.kind == kindHost {
			return e, fmt.Errorf("a bare * would allow every host; list the hosts or domains (*.example.com)")
		}
		return e, fmt.Errorf("'*' is only accepted as the first label (*.example.com) or as the port (host:*)")
	}
	if endsInNumber(name) {
		if ip, ok := parseLegacyIPv4(name); ok && e.kind == kindHost {
			return e, fmt.Errorf("non-standard IPv4 spelling; write it as %s", ip)
		}
		return e, fmt.Errorf("the last label is numeric: neither a host name nor an IPv4 address")
	}
	if err := checkHostname(name); err != nil {
		return e, err
	}
	if e.kind == kindSuffix {
		if len(name) > maxHostLen-2 {
			return e, fmt.Errorf("no subdomain of a %d-byte domain fits in a host name (%d bytes at most)", len(name), maxHostLen)
		}
		e.name = "." + name
	} else {
		e.name = name
	}
	return e, nil
}

func addrEntry(e entry, ip netip.Addr) (entry, error) {
	if ip.Is4In6() {
		return e, fmt.Errorf("IPv4-mapped address; write the IPv4 form %s", ip.Unmap())
	}
	if v := classify(ip); v.rule != nil && v.rule.never {
		return e, fmt.Errorf("%s is %s, which the proxy never connects to", describeAddr(ip, v), v.rule.what)
	}
	e.kind = kindAddr
	e.prefix = netip.PrefixFrom(ip, ip.BitLen())
	return e, nil
}

// mapped4 is the block of IPv4-mapped IPv6 addresses.
var mapped4 = netip.MustParsePrefix("::ffff:0:0/96")

func parsePrefixEntry(raw string) (entry, error) {
	e := entry{raw: raw, kind: kindPrefix, port: anyPort}
	p, err := netip.ParsePrefix(raw)
	if err != nil {
		return e, fmt.Errorf("not a CIDR (a.b.c.d/n or x::/n); CIDR entries take no port")
	}
	if p.Addr().Is4In6() {
		return e, fmt.Errorf("IPv4-mapped prefix; write the IPv4 form")
	}
	if p.Masked() != p {
		return e, fmt.Errorf("host bits set; did you mean %s", p.Masked())
	}
	if p.Bits() == 0 {
		return e, fmt.Errorf("a /0 matches every address; name the ranges you mean")
	}
	// The proxy reads an IPv4-mapped address (::ffff:a.b.c.d) as the IPv4
	// address it carries, so an IPv6 range around the mapped block would
	// not allow the part of itself it seems to name.
	if p.Bits() <= mapped4.Bits() && p.Contains(mapped4.Addr()) {
		return e, fmt.Errorf("covers the IPv4-mapped block %s, whose addresses the proxy matches as IPv4; "+
			"name the IPv6 ranges beside it, and IPv4 ones in IPv4 form", mapped4)
	}
	for _, tbl := range [][]rangeRule{neverV4, neverV6} {
		for _, r := range tbl {
			if r.prefix.Bits() <= p.Bits() && r.prefix.Contains(p.Addr()) {
				return e, fmt.Errorf("inside %s (%s), which the proxy never connects to", r.prefix, r.what)
			}
		}
	}
	if v4, ok := embeddedV4Prefix(p); ok {
		for _, r := range neverV4 {
			if r.prefix.Bits() <= v4.Bits() && r.prefix.Contains(v4.Addr()) {
				inside := ""
				if r.prefix != v4 {
					inside = fmt.Sprintf(", inside %s", r.prefix)
				}
				return e, fmt.Errorf("carries the IPv4 range %s%s (%s), which the proxy never connects to",
					v4, inside, r.what)
			}
		}
	}
	e.prefix = p
	return e, nil
}

// didYouMean returns a hint naming s when s alone is a valid entry.
func didYouMean(s string) string {
	if s == "" || strings.Contains(s, "/") {
		return ""
	}
	if _, err := parseEntry(s); err != nil {
		return ""
	}
	return fmt.Sprintf(" (here: %s)", strconv.Quote(s))
}

// MatchHost returns the first host or suffix entry, as written, that
// allows the host name (normalized, as Target.Name) on port.
func (a List) MatchHost(name string, port uint16) (string, bool) {
	e, ok := a.hostEntry(name, port)
	return e.raw, ok
}

// MatchAddr returns the first address or CIDR entry, as written, that
// names ip on port; for an IPv6 address carrying an IPv4 one (NAT64,
// 6to4), an entry naming either counts.
func (a List) MatchAddr(ip netip.Addr, port uint16) (string, bool) {
	e, ok := a.addrEntry(ip, port)
	return e.raw, ok
}

// MatchExact returns the first entry, as written, that names ip itself
// (an address entry, or a CIDR of that one address) on port: a range that
// merely contains ip does not count.
func (a List) MatchExact(ip netip.Addr, port uint16) (string, bool) {
	for _, e := range a.entries {
		if (e.kind == kindAddr || e.kind == kindPrefix) && e.prefix.IsSingleIP() && e.prefix.Addr() == ip && e.portOK(port) {
			return e.raw, true
		}
	}
	return "", false
}

// hostEntry returns the first host or suffix entry that allows name:port.
func (a List) hostEntry(name string, port uint16) (entry, bool) {
	for _, e := range a.entries {
		switch e.kind {
		case kindHost:
			if e.name == name && e.portOK(port) {
				return e, true
			}
		case kindSuffix:
			if strings.HasSuffix(name, e.name) && len(name) > len(e.name) && e.portOK(port) {
				return e, true
			}
		}
	}
	return entry{}, false
}

// addrEntry returns the first address or CIDR entry that names ip:port. For
// an IPv6 address carrying an IPv4 one (NAT64, 6to4), an entry naming either
// counts.
func (a List) addrEntry(ip netip.Addr, port uint16) (entry, bool) {
	ip = ip.Unmap()
	v4, hasV4 := embeddedV4(ip)
	if ip.Is4() {
		hasV4 = false
	}
	for _, e := range a.entries {
		if e.kind != kindAddr && e.kind != kindPrefix {
			continue
		}
		if !e.portOK(port) {
			continue
		}
		if e.prefix.Contains(ip) || (hasV4 && e.prefix.Contains(v4)) {
			return e, true
		}
	}
	return entry{}, false
}

// Suggest returns the --allow-host value that would allow host:port.
func Suggest(host string, port uint16) string {
	if port == 80 || port == 443 {
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// describeAddr names ip for people, mentioning the IPv4 address it carries.
func describeAddr(ip netip.Addr, v Verdict) string {
	if v.embedded.IsValid() && v.embedded != ip {
		return fmt.Sprintf("%s (which carries the IPv4 address %s)", ip, v.embedded)
	}
	return ip.String()
}
