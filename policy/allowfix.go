package policy

import (
	"net/netip"
	"net/url"
	"strings"

	"github.com/sandbox-run/sandbox-run/allowlist"
)

// AllowHostFix is the fix of the refused allow-list entry h: the exact
// entry to write instead when one can be read off h, or what to do when
// no entry can allow it (loopback, metadata), else the general form. It
// does not say whether h is refused: allowlist.Parse does.
func AllowHostFix(h string) string {
	h = strings.TrimSpace(h)
	if isLoopbackEntry(h) {
		return "drop --allow-host " + h + ": the host's loopback services never reach the sandbox, by design; run the service inside the same sandbox (sandbox-run run -- sh -c 'SERVER & CLIENT'), or serve it on a private address and allow exactly that, e.g. --allow-host 10.0.0.5:8080"
	}
	if try := entryFor(h); try != "" && try != h {
		if _, err := allowlist.Parse([]string{try}); err == nil {
			return "--allow-host " + try
		}
	}
	if h == "*" || h == "*:*" {
		return "list the hosts, or a domain with its subdomains: --allow-host example.com --allow-host *.example.com"
	}
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && (a.IsLinkLocalUnicast() || a.Unmap().IsLinkLocalUnicast()) {
		return "drop --allow-host " + h + ": link-local and cloud metadata addresses are never reachable; pass what the command needs from metadata with --env"
	}
	return allowHostFix
}

// isLoopbackEntry: localhost, a name under it, or a loopback address,
// with or without a port or brackets.
func isLoopbackEntry(h string) bool {
	host := h
	if u, err := url.Parse("//" + h); err == nil && u.Host == h {
		host = u.Hostname()
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// entryFor reads the entry h meant: the host (and port) of a URL or of
// host/path, the IPv4 form of an IPv4-mapped address, the masked prefix
// of a CIDR with host bits set, the dotted form of an IPv4 address
// written otherwise. "" when none is read.
func entryFor(h string) string {
	if strings.Contains(h, "://") {
		if u, err := url.Parse(h); err == nil && u.Host != "" {
			return u.Host
		}
		return ""
	}
	if p, err := netip.ParsePrefix(h); err == nil {
		if p.Addr().Is4In6() {
			return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked().String()
		}
		return p.Masked().String()
	}
	if host, _, ok := strings.Cut(h, "/"); ok {
		return host
	}
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && a.Is4In6() {
		return a.Unmap().String()
	}
	if ap, err := netip.ParseAddrPort(h); err == nil && ap.Addr().Is4In6() {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
	}
	return ""
}
