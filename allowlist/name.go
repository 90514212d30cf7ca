package allowlist

import "net/netip"

// MatchName returns the first host or suffix entry, as written, that
// allows the host name (normalized, as Target.Name) on some port. It is
// the question a resolver asks before it knows which port the answer will
// be connected to; the connection is then judged on its own port.
func (a List) MatchName(name string) (string, bool) {
	for _, e := range a.entries {
		if e.kind != kindHost && e.kind != kindSuffix {
			continue
		}
		if _, ok := a.hostEntry(name, wildcardPort(e)); ok {
			return e.raw, true
		}
	}
	return "", false
}

// NamesAddr reports whether an address or CIDR entry names ip on some
// port (a resolver's answer in a private range is given only then).
func (a List) NamesAddr(ip netip.Addr) bool {
	for _, e := range a.entries {
		if _, ok := a.addrEntry(ip, wildcardPort(e)); ok {
			return true
		}
	}
	return false
}

// wildcardPort is a port that entry e allows.
func wildcardPort(e entry) uint16 {
	switch e.port {
	case anyPort, 0:
		return 443
	default:
		return uint16(e.port)
	}
}
