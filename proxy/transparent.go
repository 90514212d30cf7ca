package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/allowlist"
	"github.com/sandbox-run/sandbox-run/internal/refusals"
)

// Refused is the error Transparent.Dial and Proxy.Lookup return when the
// policy refuses a connection or a name: the same reason codes, rule and
// fix as an HTTP refusal, since it was judged by the same functions.
type Refused struct {
	Reason string // a refusal code (see the package documentation)
	Rule   string // which rule refused, for people
	Fix    string // how to allow it, for people
}

func (e *Refused) Error() string { return e.Rule + "; to allow it: " + e.Fix }

func refusedErr(r *refusal) *Refused { return &Refused{Reason: r.reason, Rule: r.rule, Fix: r.fix} }

// Transparent opens the connections of a transparent netstack: each TCP
// connection the sandbox made to an address, judged by the exact address
// it reaches with the rules of the HTTP proxy, recorded in the same audit
// and counts, and closed when ctx ends.
type Transparent struct{ s *session }

// Transparent returns the dialer of a netstack that serves until ctx
// ends; every connection it opened is closed then.
func (p *Proxy) Transparent(ctx context.Context) *Transparent {
	s := newSession(p, ctx)
	release := p.own.hold() // the own-address watch, while it serves
	context.AfterFunc(ctx, func() { s.closeAll(); release() })
	return &Transparent{s: s}
}

// Dial judges a connection to dst, which the sandbox's resolver gave out
// for name ("" when it did not: the connection is then judged as the
// address literal), records the decision, and connects to exactly dst. A
// refusal is a *Refused. A name is judged as the HTTP proxy judges a host
// name, against dst alone (not a fresh lookup: the sandbox connects to the
// address it was given); an address the name's entry does not cover is
// then judged as a literal, so an IP entry still admits it.
func (t *Transparent) Dial(ctx context.Context, name string, dst netip.AddrPort) (net.Conn, error) {
	c, err := t.open(ctx, name, dst, nil)
	if err != nil {
		return nil, err // not a nil *upstreamConn in a non-nil net.Conn
	}
	return c, nil
}

// HandOff is Dial for a connection the sandbox will hold itself
// (internal/connbroker): judged, recorded and connected the same way, the
// socket given to bind before it connects (connbroker.Ports.Bind), and
// returned as a file of its own. The audit's egress_end line says
// "handed-off" at once, without byte counts: the bytes never pass
// sandbox-run.
func (t *Transparent) HandOff(ctx context.Context, name string, dst netip.AddrPort, bind func(network string, c syscall.RawConn) error) (*os.File, error) {
	c, err := t.open(ctx, name, dst, bind)
	if err != nil {
		return nil, err
	}
	f, err := c.TCPConn.File()
	c.handedOff = err == nil
	c.Close()
	return f, err
}

// open judges a connection to dst under name, records the decision and
// connects, the socket given to bind first when bind is set.
func (t *Transparent) open(ctx context.Context, name string, dst netip.AddrPort, bind func(string, syscall.RawConn) error) (*upstreamConn, error) {
	p := t.s.p
	d := p.decideAddr(name, dst)
	d.method, d.bind = "TCP", bind
	// A direct connection would carry requests past the rules.
	t.refuseTerminated(d)
	p.record(d)
	if d.refusal != nil {
		return nil, refusedErr(d.refusal)
	}
	return t.s.dial(ctx, d, d.t.String())
}

// refuseTerminated refuses a direct connection to a host the proxy
// terminates (an --allow-http rule or a --secret names it): such a host
// is reached only through the proxy, which judges each request.
func (t *Transparent) refuseTerminated(d *decision) {
	if d.refusal == nil && t.s.p.l7.terminates(d.t) {
		d.refusal = &refusal{reason: reasonTerminatedDirect, status: http.StatusForbidden,
			rule: d.t.String() + " has --allow-http rules or a --secret: only requests through the proxy are judged",
			fix:  "connect through the proxy (HTTPS_PROXY is set inside; curl, git, pip and npm use it)"}
	}
}

// decideAddr is decide for a connection whose address is already known.
func (p *Proxy) decideAddr(name string, dst netip.AddrPort) *decision {
	ip := dst.Addr().Unmap().WithZone("")
	lit, err := parseTarget(netip.AddrPortFrom(ip, dst.Port()).String(), 0)
	if err != nil {
		return &decision{raw: dst.String(), refusal: badTarget(reasonBadHost, dst.String(), err)}
	}
	if name != "" {
		if t, err := parseTarget(net.JoinHostPort(name, strconv.Itoa(int(dst.Port()))), 0); err == nil {
			if e, ok := p.allow.Load().MatchHost(t.Name(), t.Port()); ok {
				d := &decision{raw: t.String(), t: t, entry: e, ips: []netip.Addr{ip}}
				d.refusal = p.judge(t, ip)
				return d
			}
		}
	}
	d := p.decide(context.Background(), "", lit.String(), lit)
	if d.refusal != nil && d.refusal.reason == reasonNotAllowed && name != "" {
		// Name the entry people would write: the name they connected by.
		if t, err := parseTarget(net.JoinHostPort(name, strconv.Itoa(int(dst.Port()))), 0); err == nil {
			d.t, d.raw, d.ips, d.refusal = t, t.String(), []netip.Addr{ip}, notAllowed(t)
			d.refusal.ip = ip
		}
	}
	return d
}

// Lookup is the sandbox resolver's question: may name be resolved, and
// to which addresses. It answers only a name that an allow-list host entry
// covers (on some port), resolves it with the proxy's resolver, and keeps
// only the answers a connection could be allowed to: never an address in
// a range the proxy never connects to or one of the host's own, and a
// private one only when an address entry names it. A name with no answer
// left is refused (rebinding to an internal address is refused like the
// literal). Each refusal is recorded in the audit ("event":"dns").
func (p *Proxy) Lookup(ctx context.Context, name string, v6 bool) ([]netip.Addr, error) {
	t, err := parseTarget(net.JoinHostPort(name, "53"), 0)
	if err != nil || t.IsAddr() {
		r := badTarget(reasonBadHost, name, errors.New("not a host name"))
		p.recordDNS(name, nil, r)
		return nil, refusedErr(r)
	}
	entry, ok := p.allow.Load().MatchName(t.Name())
	if !ok {
		r := notAllowed(t)
		r.rule = t.Name() + " is not on the allow list; the sandbox's resolver answers only names an entry covers"
		r.fix = "add --allow-host " + t.Name() + " (with :PORT for a port other than 80 and 443)"
		r.flag = "--allow-host " + t.Name()
		p.recordDNS(t.Name(), nil, r)
		return nil, refusedErr(r)
	}
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	network := "ip4"
	if v6 {
		network = "ip6"
	}
	answers, err := p.resolver.LookupNetIP(rctx, network, t.Name())
	if err != nil && !isNotFound(err) {
		r := &refusal{reason: reasonDNS, status: http.StatusBadGateway,
			rule: fmt.Sprintf("%s did not resolve on the host: %v", t.Name(), err),
			fix:  "check the name; it is resolved by the host's resolver"}
		p.recordDNS(t.Name(), nil, r)
		return nil, refusedErr(r)
	}
	var ips []netip.Addr
	for _, ip := range answers {
		ip = ip.Unmap().WithZone("")
		if r := p.judgeAnswer(t, ip); r != nil {
			p.recordDNS(t.Name(), []netip.Addr{ip}, r)
			return nil, refusedErr(r)
		}
		if !slices.Contains(ips, ip) {
			ips = append(ips, ip)
		}
	}
	p.recordDNSAllowed(t.Name(), ips, entry)
	return ips, nil
}

func isNotFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

// judgeAnswer refuses an answer no connection could be allowed to: the
// never ranges, the host's own addresses (without an exact entry), and
// private ranges no address entry names.
func (p *Proxy) judgeAnswer(t target, ip netip.Addr) *refusal {
	v := allowlist.Classify(ip)
	if v.Never() {
		return p.judgeRange(t, ip, v)
	}
	if r := p.judgeOwn(t, ip); r != nil {
		return r
	}
	if v.Public() || p.allow.Load().NamesAddr(ip) {
		return nil
	}
	return p.judgeRange(t, ip, v)
}

// recordDNS writes a refused lookup to the audit and the counts.
func (p *Proxy) recordDNS(name string, ips []netip.Addr, r *refusal) {
	p.counts.refused.Add(1)
	line := auditLine{Time: time.Now().UTC().Format(time.RFC3339Nano), RunID: p.runID, Event: "dns",
		Method: "DNS", Host: name, Decision: "refuse", Reason: r.reason}
	if r.ip.IsValid() {
		line.IP = r.ip.String()
	}
	for _, ip := range ips {
		line.IPs = append(line.IPs, ip.String())
	}
	p.log.Info("name lookup refused", "host", name, "ip", line.IP, "reason", r.reason, "fix", r.fix)
	line.Fix = r.flag
	p.writeAudit(line)
	if r.reason != reasonDNS { // a name that does not resolve is no policy's refusal
		c := r.collected(name, 0)
		c.Kind = refusals.KindLookup
		p.refused.Add(c)
	}
}

// recordDNSAllowed writes an answered lookup to the audit.
func (p *Proxy) recordDNSAllowed(name string, ips []netip.Addr, entry string) {
	line := auditLine{Time: time.Now().UTC().Format(time.RFC3339Nano), RunID: p.runID, Event: "dns",
		Method: "DNS", Host: name, Decision: "allow", Reason: "allow-list", Entry: entry}
	for _, ip := range ips {
		line.IPs = append(line.IPs, ip.String())
	}
	if len(ips) > 0 {
		line.IP = line.IPs[0]
	}
	p.writeAudit(line)
}
