package allowlist

import "net/netip"

// MatchName returns the first host or suffix entry, as written, that
// allows the host name (normalized, as Target.Name) on some port. It is
// the question a resolver asks before it knows which port the answer will
// be connected to; the connection is then judged on its own port.
func (a List) MatchName(name string) (string, bool) {
	for _, e := range a.entries {
		if (e.kind == kindHost || e.kind == kindSuffix) && (List{entries: []entry{e}}).hostOK(name, e) {
			return e.raw, true
		}
	}
	return "", false
}

// hostOK reports whether the one-entry list a, holding e, allows name on
// a port e allows.
func (a List) hostOK(name string, e entry) bool {
	_, ok := a.hostEntry(name, wildcardPort(e))
	return ok
}

// NamesAddr reports whether an address or CIDR entry names ip on some
// port (a resolver's answer in a private range is given only then).
func (a List) NamesAddr(ip netip.Addr) bool {
	for _, e := range a.entries {
		if e.kind != kindAddr && e.kind != kindPrefix {
			continue
		}
		if _, ok := (List{entries: []entry{e}}).addrEntry(ip, wildcardPort(e)); ok {
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
