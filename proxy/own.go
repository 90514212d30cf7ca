package proxy

import (
	"github.com/sandbox-run/sandbox-run/allowlist"

	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sync"
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

// ownWatch is the proxy host's own addresses (list, interfaceAddrs), as
// judgeOwn reads them. While something holds the watch (Serve does, for as
// long as it serves), it keeps an address-event socket (openAddrEvents,
// netlink on Linux) and lists the interfaces again only when that socket
// has queued an event since the last listing, or cannot be read. The
// kernel queues the event before the change's own system call returns,
// so a change made before a call began is seen by that call: the same
// guarantee as listing at every call, for one non-blocking read instead
// of a netlink dump (socket, bind, two requests, close) per judgement,
// which under load was a fifth of the proxy's CPU time. Nobody holding it,
// or no socket (another system, no netlink), it lists at every call.
// Not guaranteed: the socket watches the network namespace of the thread
// that opened it and a listing reads the calling thread's, as
// net.InterfaceAddrs always did; both are the process's unless a caller
// moved a locked thread elsewhere.
type ownWatch struct {
	list func() ([]netip.Addr, error)

	mu    sync.Mutex
	users int
	sock  *os.File // open while users > 0, unless it could not be opened
	addrs []netip.Addr
	valid bool // addrs is the listing since which sock queued no event
	buf   []byte
}

// hold opens the event socket for the first holder; release closes it
// after the last. A socket that cannot be opened leaves the watch
// listing at every call.
func (w *ownWatch) hold() (release func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.users++; w.users == 1 {
		if f, err := openAddrEvents(); err == nil {
			w.sock, w.valid, w.buf = f, false, make([]byte, 16<<10)
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.users--; w.users == 0 && w.sock != nil {
				_ = w.sock.Close()
				w.sock, w.valid, w.addrs, w.buf = nil, false, nil, nil
			}
		})
	}
}

// get returns the addresses, listing them again unless the socket shows
// that nothing changed since the last listing. A failed listing is
// returned and not kept.
func (w *ownWatch) get() ([]netip.Addr, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sock == nil {
		return w.list()
	}
	if drainAddrEvents(w.sock, w.buf) {
		w.valid = false
	}
	if w.valid {
		return w.addrs, nil
	}
	as, err := w.list()
	if err != nil {
		return nil, err
	}
	w.addrs, w.valid = as, true
	return as, nil
}

// judgeOwn refuses an address of the proxy host's own interfaces, as
// they are when the call begins (ownWatch: an address added a moment ago
// counts), unless an allow-list entry names that exact address.
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
