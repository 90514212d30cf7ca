//go:build linux

package netstack

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// answerTTL is the TTL of every answer: short, so that a sandbox asks
// again (and the policy is asked again) rather than caching for long.
const answerTTL = 30

// serveDNS answers on the DNS address, UDP port 53. TCP port 53 is
// answered through forward (serveDNSConn), like every other connection:
// under its own slots and with the same linger after the close.
func (st *Stack) serveDNS(ctx context.Context) error {
	addr := tcpip.FullAddress{NIC: nicID, Addr: tcpip.AddrFrom4(st.cfg.DNS.As4()), Port: 53}
	uc, err := gonet.DialUDP(st.s, &addr, nil, ipv4.ProtocolNumber)
	if err != nil {
		return fmt.Errorf("netstack: DNS over UDP: %v", err)
	}
	context.AfterFunc(ctx, func() { uc.Close() })
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		st.serveUDP(ctx, uc)
	}()
	return nil
}

// serveDNSConn answers DNS over one TCP connection to the resolver's
// address, if one of maxDNSConns is free (else it is reset), then holds
// the slot while the closed connection's last answers are unacknowledged
// (linger).
func (st *Stack) serveDNSConn(r *tcp.ForwarderRequest) {
	if !st.dns.take() {
		r.Complete(true)
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		st.dns.give()
		r.Complete(true)
		return
	}
	r.Complete(false)
	c := gonet.NewTCPConn(&wq, ep)
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		defer st.dns.give()
		stop := context.AfterFunc(st.ctx, func() { c.Close() })
		defer stop()
		st.serveTCP(st.ctx, c)
		linger(st.ctx, ep)
	}()
}

// maxQueries bounds the UDP queries answered at once: a query beyond it
// is dropped (the client retries), so a flood costs no more than this
// many lookups on the host.
const maxQueries = 64

func (st *Stack) serveUDP(ctx context.Context, uc *gonet.UDPConn) {
	buf := make([]byte, 1500)
	sem := make(chan struct{}, maxQueries)
	for {
		n, from, err := uc.ReadFrom(buf)
		if err != nil {
			return
		}
		select {
		case sem <- struct{}{}:
		default:
			continue
		}
		q := append([]byte(nil), buf[:n]...)
		go func() {
			defer func() { <-sem }()
			if resp := st.answer(ctx, q, 512); resp != nil {
				uc.WriteTo(resp, from)
			}
		}()
	}
}

// serveTCP answers length-prefixed queries on one connection (RFC 1035
// 4.2.2) until the client stops or is idle for ten seconds.
func (st *Stack) serveTCP(ctx context.Context, c net.Conn) {
	defer c.Close()
	for {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		resp := st.answer(ctx, q, 65535)
		if resp == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

// answer builds the response to one query: A records for names the
// policy allows (AAAA empty), NXDOMAIN for names it refuses, an empty answer for other
// types of allowed names, and nothing (no reply) for what does not parse.
// Responses over max bytes are truncated (TC set) so a client retries
// over TCP.
func (st *Stack) answer(ctx context.Context, q []byte, max int) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil || h.Response {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired,
		RecursionAvailable: true, Authoritative: false}
	if h.OpCode != 0 || len(qs) != 1 {
		rh.RCode = dnsmessage.RCodeNotImplemented
		return build(rh, qs, nil, max)
	}
	question := qs[0]
	name := strings.TrimSuffix(question.Name.String(), ".")
	var ips []netip.Addr
	switch question.Type {
	case dnsmessage.TypeA:
		ips, err = st.cfg.Lookup(ctx, name, false)
	default:
		// Other types (AAAA: the device has no IPv6 route; MX, TXT,
		// SRV...) of an allowed name: no data, so a client goes on with
		// IPv4 at once. The policy is still asked, so an unlisted name is
		// NXDOMAIN for any type.
		_, err = st.cfg.Lookup(ctx, name, false)
	}
	if err != nil {
		rh.RCode = dnsmessage.RCodeNameError
		return build(rh, qs, nil, max)
	}
	st.names.put(name, ips)
	return build(rh, qs, ips, max)
}

func build(h dnsmessage.Header, qs []dnsmessage.Question, ips []netip.Addr, max int) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), h)
	b.EnableCompression()
	b.StartQuestions()
	for _, q := range qs {
		b.Question(q)
	}
	b.StartAnswers()
	for _, ip := range ips {
		rh := dnsmessage.ResourceHeader{Name: qs[0].Name, Class: dnsmessage.ClassINET, TTL: answerTTL}
		if ip.Is4() {
			b.AResource(rh, dnsmessage.AResource{A: ip.As4()})
		} else {
			b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: ip.As16()})
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	if len(out) > max {
		h.Truncated = true
		return build(h, qs, nil, max)
	}
	return out
}
