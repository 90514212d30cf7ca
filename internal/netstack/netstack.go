//go:build linux

// Package netstack terminates a sandbox's network on the host side: a
// userspace TCP/IP stack (gVisor's tcpip) reads the IP packets of a TUN
// device whose other end is the sandbox's only route, accepts each TCP
// connection only after the policy allowed it and a connection to the
// destination was opened, and answers DNS at one address with the
// policy's resolver. Nothing else leaves: UDP other than DNS, ICMP and
// every other protocol end in the stack.
//
// The package decides nothing itself: Config.Dial and Config.Lookup are
// the policy (sandbox-run wires them to the egress proxy's judge). It
// guarantees that no packet of the sandbox reaches the host's network
// except as bytes of a connection Dial opened, and that a refused
// connection is answered with a reset before its handshake completes.
package netstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// Config is what a Stack serves and asks.
type Config struct {
	// FD is the TUN device's descriptor (IFF_TUN|IFF_NO_PI). The stack
	// owns it from New on and closes it when it ends.
	FD int
	// MTU is the device's MTU.
	MTU uint32
	// VnetHdr says the device was made with IFF_VNET_HDR: the stack then
	// turns on checksum offload (TUN_F_CSUM) on it and leaves TCP and
	// UDP checksums to the sandbox's kernel.
	VnetHdr bool
	// DNS is the address (IPv4) at which the stack answers name lookups,
	// UDP and TCP port 53.
	DNS netip.Addr
	// Dial opens a connection to dst for the sandbox, or refuses it (any
	// error: the sandbox's connection is reset). name is the name the
	// resolver last gave dst out for, "" if none.
	Dial func(ctx context.Context, name string, dst netip.AddrPort) (net.Conn, error)
	// Lookup answers a name lookup (IPv6 addresses when v6): an error
	// is answered NXDOMAIN, which tells tools at once that the name is
	// not reachable.
	Lookup func(ctx context.Context, name string, v6 bool) ([]netip.Addr, error)
	// Limits bound the host memory the sandbox's connections hold.
	Limits Limits
	// Refused, if set, is told of each connection the stack resets by
	// its own Limits (not the policy's: Dial's refusals are Dial's to
	// record); err is a *ConnLimitError (errors.Is ErrConnLimit). It must
	// not block.
	Refused func(name string, dst netip.AddrPort, err error)
	Logger  *slog.Logger
}

// Stack is one sandbox's netstack.
type Stack struct {
	cfg   Config
	s     *stack.Stack
	names names
	link  *tunLink
	log   *slog.Logger
	ctx   context.Context
	wg    sync.WaitGroup
	lim   Limits
	conns slots     // relayed connections (Limits.MaxConns)
	dns   slots     // the resolver's TCP connections (maxDNSConns)
	bufs  sync.Pool // the relays' copy buffers, between connections
}

const nicID = 1

// New builds the stack over cfg.FD. Serve runs it. On error, cfg.FD is
// closed.
func New(cfg Config) (st *Stack, err error) {
	link, err := newTunLink(cfg.FD, cfg.MTU, cfg.VnetHdr)
	defer func() {
		if err != nil {
			link.f.Close()
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("netstack: device: %w", err)
	}
	if cfg.Dial == nil || cfg.Lookup == nil || !cfg.DNS.Is4() {
		return nil, errors.New("netstack: Dial, Lookup and an IPv4 DNS address are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6},
	})
	if terr := s.CreateNIC(nicID, link.ep); terr != nil {
		s.Close()
		return nil, fmt.Errorf("netstack: NIC: %v", terr)
	}
	lim := cfg.Limits.withDefaults()
	tune(s, lim)
	// Every destination is the stack's to terminate: promiscuous accepts
	// packets for any address, spoofing answers from it.
	s.SetPromiscuousMode(nicID, true)
	s.SetSpoofing(nicID, true)
	s.SetRouteTable([]tcpip.Route{
		{Destination: header.IPv4EmptySubnet, NIC: nicID},
		{Destination: header.IPv6EmptySubnet, NIC: nicID},
	})
	dns := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddrFrom4(cfg.DNS.As4()).WithPrefix()}
	if terr := s.AddProtocolAddress(nicID, dns, stack.AddressProperties{}); terr != nil {
		s.Close()
		return nil, fmt.Errorf("netstack: DNS address: %v", terr)
	}
	return &Stack{cfg: cfg, s: s, log: log, link: link, lim: lim,
		conns: make(slots, lim.MaxConns), dns: make(slots, maxDNSConns), bufs: sync.Pool{New: newRelayBuf}}, nil
}

// tune sets the TCP options a bulk transfer through the stack needs,
// under lim's ceiling: selective acknowledgements and receive buffers that
// auto-tune up to lim.BufferMax. The send buffer starts at the ceiling:
// the hop to the sandbox is short, and a send buffer is only filled as
// fast as the sandbox leaves it unacknowledged.
func tune(s *stack.Stack, lim Limits) {
	sack := tcpip.TCPSACKEnabled(true)
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &sack)
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: min(1<<20, lim.BufferMax), Max: lim.BufferMax}
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &rcv)
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: lim.BufferMax, Max: lim.BufferMax}
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &snd)
	mod := tcpip.TCPModerateReceiveBufferOption(true)
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &mod)
	// Closed endpoints hold no buffers, but each is a few KiB: on a
	// hop where no segment is ever delayed, TIME-WAIT and FIN-WAIT-2
	// need not last Linux's 60 seconds.
	tw := tcpip.TCPTimeWaitTimeoutOption(time.Second)
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &tw)
	fw := tcpip.TCPLingerTimeoutOption(5 * time.Second)
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &fw)
}

// Serve serves until ctx ends, then closes the stack, the device and
// every connection, and returns nil.
func (st *Stack) Serve(ctx context.Context) error {
	st.ctx = ctx
	st.link.start(ctx, st.cfg.MTU)
	fwd := tcp.NewForwarder(st.s, 0, st.lim.MaxPending, st.forward)
	st.s.SetTransportProtocolHandler(tcp.ProtocolNumber, fwd.HandlePacket)
	if err := st.serveDNS(ctx); err != nil {
		st.close()
		return err
	}
	<-ctx.Done()
	st.close()
	st.wg.Wait()
	return nil
}

// close ends the stack and its goroutines, then closes the device and
// waits for the link's.
func (st *Stack) close() {
	st.s.Close()
	st.s.Wait()
	st.link.close()
}

// forward handles one TCP SYN: the resolver's, or else claim a
// connection slot (or reset and report), ask Dial, then complete the
// handshake and relay, or reset. The slot is held until the relay ends
// and the sandbox has acknowledged the last data (linger).
func (st *Stack) forward(r *tcp.ForwarderRequest) {
	id := r.ID()
	dst, ok := addrPort(id.LocalAddress, id.LocalPort)
	if !ok {
		r.Complete(true)
		return
	}
	if dst == netip.AddrPortFrom(st.cfg.DNS, 53) {
		st.serveDNSConn(r)
		return
	}
	name := st.names.get(dst.Addr())
	if !st.conns.take() {
		err := &ConnLimitError{Max: st.lim.MaxConns}
		st.log.Debug("netstack: connection refused", "dst", dst, "err", err)
		if st.cfg.Refused != nil {
			st.cfg.Refused(name, dst, err)
		}
		r.Complete(true)
		return
	}
	ep, down, up := st.open(r, name, dst)
	if down == nil {
		st.conns.give()
		return
	}
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		defer st.conns.give()
		relay(st.ctx, down, up, &st.bufs)
		linger(st.ctx, ep)
	}()
}

// lingerMax bounds how long a closed connection may keep data (or its
// FIN) that the sandbox has not acknowledged, holding its slot; then it
// is reset. Without it a command that half-closes and never reads would
// leave a full send buffer behind each connection, outside the limit.
const (
	lingerMax  = 10 * time.Second
	lingerPoll = 20 * time.Millisecond
)

// linger waits, while the caller holds the connection's slot, until the
// sandbox has acknowledged everything the closed endpoint still sends,
// at most lingerMax or until ctx ends; then resets it if anything is
// left.
func linger(ctx context.Context, ep tcpip.Endpoint) {
	deadline := time.Now().Add(lingerMax)
	for unacked(tcp.EndpointState(ep.State())) {
		if ctx.Err() != nil || time.Now().After(deadline) {
			ep.Abort()
			return
		}
		time.Sleep(lingerPoll)
	}
}

// unacked says whether a closed endpoint in state s may still hold data
// for the sandbox: its FIN, which follows the data, is not yet
// acknowledged.
func unacked(s tcp.EndpointState) bool {
	switch s {
	case tcp.StateFinWait1, tcp.StateClosing, tcp.StateLastAck:
		return true
	}
	return false
}

// open asks Dial and completes the handshake, or resets it and returns
// nils.
func (st *Stack) open(r *tcp.ForwarderRequest, name string, dst netip.AddrPort) (tcpip.Endpoint, *gonet.TCPConn, net.Conn) {
	up, err := st.cfg.Dial(st.ctx, name, dst)
	if err != nil {
		st.log.Debug("netstack: connection refused", "dst", dst, "err", err)
		r.Complete(true)
		return nil, nil, nil
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		up.Close()
		r.Complete(true)
		return nil, nil, nil
	}
	r.Complete(false)
	ep.SocketOptions().SetKeepAlive(true)
	return ep, gonet.NewTCPConn(&wq, ep), up
}

// relay copies both ways until both directions end; an end of file
// half-closes the other side.
func relay(ctx context.Context, down *gonet.TCPConn, up net.Conn, bufs *sync.Pool) {
	stop := context.AfterFunc(ctx, func() { down.Close(); up.Close() })
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := copyBig(up, down, bufs); err != nil {
			up.Close()
			down.Close()
			return
		}
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	}()
	if _, err := copyBig(down, up, bufs); err == nil {
		down.CloseWrite()
	} else {
		down.Close()
		up.Close()
	}
	wg.Wait()
	down.Close()
	up.Close()
}

// copyBig copies with a RelayBuffer, hiding ReadFrom and WriteTo: their
// 32 KiB copies hand the stack small writes, each its own trip through
// the stack's send path. The buffer comes from relayBufs: allocating
// (and zeroing) two per connection was a tenth of the stack's time in a
// run of short connections.
func copyBig(dst io.Writer, src io.Reader, bufs *sync.Pool) (int64, error) {
	buf := bufs.Get().(*[]byte)
	defer bufs.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *buf)
}

// newRelayBuf is the stack's relay buffer pool's New.
func newRelayBuf() any {
	b := make([]byte, RelayBuffer)
	return &b
}

func addrPort(a tcpip.Address, port uint16) (netip.AddrPort, bool) {
	ip, ok := netip.AddrFromSlice(a.AsSlice())
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip.Unmap(), port), true
}

// NameOf is the name the stack's resolver last gave ip out for ("" for
// none): what a connection to ip is judged and audited under, on the
// netstack's path or the connect broker's.
func (st *Stack) NameOf(ip netip.Addr) string { return st.names.get(ip) }

// names remembers, per address, the name the resolver last gave it out
// for, so that a connection to it is judged and audited under the name.
type names struct {
	mu sync.Mutex
	m  map[netip.Addr]string
}

// maxNames bounds the memory: a sandbox that resolves without end
// forgets the oldest answers (its connections are then judged by address).
const maxNames = 4096

func (n *names) put(name string, ips []netip.Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil || len(n.m) > maxNames {
		n.m = make(map[netip.Addr]string)
	}
	for _, ip := range ips {
		n.m[ip] = name
	}
}

func (n *names) get(ip netip.Addr) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m[ip]
}
