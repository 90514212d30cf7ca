package proxy

import (
	"github.com/sandbox-run/sandbox-run/allowlist"

	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
)

// reasonOwnAddr is the refusal code for an address of the proxy host's own
// interfaces.
const reasonOwnAddr = "own-address"

// interfaceAddrs returns the addresses of every interface of the proxy
// host's network namespace, every family, as the kernel lists them now.
func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, addr.Unmap().WithZone(""))
		}
	}
	return out, nil
}

// judgeOwn refuses an address of the proxy host's own interfaces, read at
// every call (so an address added a moment ago counts, and there is no
// cache to go stale), unless an allow-list entry names that exact address.
// A service that listens on the host's LAN or bridge address is the host,
// as much as one on loopback is. When the interfaces cannot be read it
// refuses: it cannot tell.
func (p *Proxy) judgeOwn(t target, ip netip.Addr) *refusal {
	own, err := p.ownAddrs()
	if err != nil {
		return &refusal{reason: reasonOwnAddr, status: http.StatusForbidden, ip: ip,
			rule: fmt.Sprintf("cannot read the proxy host's own addresses to check %s: %v", ip, err),
			fix:  "check that the proxy can list the host's interfaces (netlink)"}
	}
	if !slices.Contains(own, ip) {
		return nil
	}
	if _, ok := p.allow.Load().MatchExact(ip, t.Port()); ok {
		return nil
	}
	via := ""
	if !t.IsAddr() {
		via = fmt.Sprintf("%s resolved to %s: ", t.Name(), ip)
	}
	return &refusal{reason: reasonOwnAddr, status: http.StatusForbidden, ip: ip,
		rule: fmt.Sprintf("%s%s is an address of the proxy host itself; a range or host name entry does not open it", via, ip),
		fix:  fmt.Sprintf("only if the sandbox must reach a service of the proxy host: add --allow-host %s", allowlist.Suggest(ip.String(), t.Port()))}
}
