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
	Logger *slog.Logger
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
}

const nicID = 1

// New builds the stack over cfg.FD. Serve runs it. On error, cfg.FD is
// closed.
func New(cfg Config) (st *Stack, err error) {
	link := newTunLink(cfg.FD, cfg.MTU)
	defer func() {
		if err != nil {
			link.f.Close()
		}
	}()
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
	tune(s)
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
	return &Stack{cfg: cfg, s: s, log: log, link: link}, nil
}

// tune sets the TCP options a bulk transfer through the stack needs:
// selective acknowledgements and buffers that auto-tune up to a few MB.
func tune(s *stack.Stack) {
	sack := tcpip.TCPSACKEnabled(true)
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &sack)
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: 1 << 20, Max: 8 << 20}
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &rcv)
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: 1 << 20, Max: 8 << 20}
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &snd)
	mod := tcpip.TCPModerateReceiveBufferOption(true)
	s.SetTransportProtocolOption(tcp.ProtocolNumber, &mod)
}

// Serve serves until ctx ends, then closes the stack, the device and
// every connection, and returns nil.
func (st *Stack) Serve(ctx context.Context) error {
	st.ctx = ctx
	st.link.start(ctx, st.cfg.MTU)
	fwd := tcp.NewForwarder(st.s, 0, 1024, st.forward)
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

// forward handles one TCP SYN: ask Dial, then complete the handshake and
// relay, or reset.
func (st *Stack) forward(r *tcp.ForwarderRequest) {
	id := r.ID()
	dst, ok := addrPort(id.LocalAddress, id.LocalPort)
	if !ok {
		r.Complete(true)
		return
	}
	up, err := st.cfg.Dial(st.ctx, st.names.get(dst.Addr()), dst)
	if err != nil {
		st.log.Debug("netstack: connection refused", "dst", dst, "err", err)
		r.Complete(true)
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		up.Close()
		r.Complete(true)
		return
	}
	r.Complete(false)
	ep.SocketOptions().SetKeepAlive(true)
	down := gonet.NewTCPConn(&wq, ep)
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		relay(st.ctx, down, up)
	}()
}

// relay copies both ways until both directions end; an end of file
// half-closes the other side.
func relay(ctx context.Context, down *gonet.TCPConn, up net.Conn) {
	stop := context.AfterFunc(ctx, func() { down.Close(); up.Close() })
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := copyBig(up, down); err != nil {
			up.Close()
			down.Close()
			return
		}
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	}()
	if _, err := copyBig(down, up); err == nil {
		down.CloseWrite()
	} else {
		down.Close()
		up.Close()
	}
	wg.Wait()
	down.Close()
	up.Close()
}

// copyBig copies with a 256 KiB buffer, hiding ReadFrom and WriteTo:
// their 32 KiB copies hand the stack small writes, each its own trip
// through the stack's send path.
func copyBig(dst io.Writer, src io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
}

func addrPort(a tcpip.Address, port uint16) (netip.AddrPort, bool) {
	ip, ok := netip.AddrFromSlice(a.AsSlice())
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ip.Unmap(), port), true
}

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
