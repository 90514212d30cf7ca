//go:build linux

package netstack

import (
	"context"
	"encoding/binary"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// tunLink moves packets between the TUN device and the stack: a reader
// that injects each packet the sandbox sent, and a writer that writes
// each packet the stack queued. It is ours rather than gVisor's fdbased
// link so that every descriptor it uses is one it closes (fdbased leaves
// an eventfd open per stack), and so that the device is read and written
// through Go's poller.
//
// The writer is a goroutine of its own rather than the sender's: writing
// to the device delivers the packet into the sandbox's stack in the
// writer's system call, and on few cores the stack's TCP processing and
// that delivery overlap better on two threads (measured: writing in the
// sender's goroutine was slower).
type tunLink struct {
	ep   *tunEndpoint
	f    *os.File
	rc   syscall.RawConn
	vnet bool
	wg   sync.WaitGroup
}

// tunEndpoint is the stack's side of the link: channel.Endpoint with the
// device's capabilities.
type tunEndpoint struct {
	*channel.Endpoint
	vnet bool
}

// queueLen is how many packets the stack may have queued for the device;
// beyond it a packet is dropped, which TCP recovers like a loss. A queued
// packet's payload is a reference to its connection's send buffer, not a
// copy.
const queueLen = 1024

// newTunLink wraps the device. vnet says the device was made with
// IFF_VNET_HDR: every packet then carries a virtio_net_hdr, and the
// link asks the device for checksum offload (see offload).
func newTunLink(fd int, mtu uint32, vnet bool) (*tunLink, error) {
	l := &tunLink{f: os.NewFile(uintptr(fd), "tun"), vnet: vnet}
	rc, err := l.f.SyscallConn()
	if err != nil {
		return l, err
	}
	l.rc = rc
	if vnet {
		if err := offload(rc); err != nil {
			return l, err
		}
	}
	l.ep = &tunEndpoint{Endpoint: channel.New(queueLen, mtu, ""), vnet: vnet}
	return l, nil
}

// Capabilities: the kernel checked (or, with offload, vouches for) what
// it wrote to the device; with offload the stack leaves TCP and UDP
// checksums to the sandbox's kernel, which trusts a packet marked
// NEEDS_CSUM that it delivers locally.
func (e *tunEndpoint) Capabilities() stack.LinkEndpointCapabilities {
	c := stack.CapabilityRXChecksumOffload
	if e.vnet {
		c |= stack.CapabilityTXChecksumOffload
	}
	return c
}

// virtio_net_hdr (linux/virtio_net.h), in the host's byte order (a TUN
// device's default: no TUNSETVNETLE).
const (
	virtioNetHdrSize      = 10
	virtioNetHdrNeedsCsum = 1
	tunFCsum              = 0x01 // linux/if_tun.h TUN_F_CSUM
	udpChecksumOffset     = 6    // in the UDP header
)

// offload asks the device for checksum offload (TUN_F_CSUM): the sandbox's
// kernel hands over packets whose checksum it did not compute (marked
// NEEDS_CSUM), and accepts ours marked so. No segmentation offload: with
// the device's MTU near 64 KiB it would gain little.
func offload(rc syscall.RawConn) error {
	var err error
	cerr := rc.Control(func(fd uintptr) { err = unix.IoctlSetInt(int(fd), unix.TUNSETOFFLOAD, tunFCsum) })
	if cerr != nil {
		return cerr
	}
	return err
}

// vnetHeader fills hdr for pkt: for TCP and UDP, NEEDS_CSUM with the
// transport header's offset, and the pseudo-header's sum in the checksum
// field (CHECKSUM_PARTIAL: the kernel completes it if the packet ever
// leaves the sandbox's namespace); for the rest (ICMP, whose checksum
// the stack always computes), no flags.
func vnetHeader(hdr *[virtioNetHdrSize]byte, pkt *stack.PacketBuffer) {
	*hdr = [virtioNetHdrSize]byte{}
	var off uint16
	switch pkt.TransportProtocolNumber {
	case header.TCPProtocolNumber:
		off = header.TCPChecksumOffset
	case header.UDPProtocolNumber:
		off = udpChecksumOffset
	default:
		return
	}
	th := pkt.TransportHeader().Slice()
	if len(th) < int(off)+2 {
		return
	}
	start := len(pkt.NetworkHeader().Slice())
	var src, dst tcpip.Address
	switch pkt.NetworkProtocolNumber {
	case header.IPv4ProtocolNumber:
		ip := header.IPv4(pkt.NetworkHeader().Slice())
		src, dst = ip.SourceAddress(), ip.DestinationAddress()
	case header.IPv6ProtocolNumber:
		ip := header.IPv6(pkt.NetworkHeader().Slice())
		src, dst = ip.SourceAddress(), ip.DestinationAddress()
	default:
		return
	}
	length := pkt.Size() - start - len(pkt.LinkHeader().Slice())
	binary.BigEndian.PutUint16(th[off:], header.PseudoHeaderChecksum(pkt.TransportProtocolNumber, src, dst, uint16(length)))
	hdr[0] = virtioNetHdrNeedsCsum
	binary.NativeEndian.PutUint16(hdr[6:], uint16(start))
	binary.NativeEndian.PutUint16(hdr[8:], off)
}

// start runs the reader and the writer until ctx ends or the device
// fails.
func (l *tunLink) start(ctx context.Context, mtu uint32) {
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		l.read(ctx, mtu)
	}()
	go func() {
		defer l.wg.Done()
		l.write(ctx)
	}()
}

// read injects each packet the device hands over.
func (l *tunLink) read(ctx context.Context, mtu uint32) {
	skip := 0
	if l.vnet {
		skip = virtioNetHdrSize
	}
	buf := make([]byte, int(mtu)+skip)
	for ctx.Err() == nil {
		n, err := l.f.Read(buf)
		if err != nil {
			return
		}
		// Without segmentation offload the device hands over whole
		// packets, so the header's flags ask nothing of us: a
		// NEEDS_CSUM packet is one the kernel vouches for.
		if n > skip {
			l.inject(buf[skip:n])
		}
	}
}

// write writes each packet the stack queued, one writev each (its
// virtio header, then its own slices: no copy into one buffer).
func (l *tunLink) write(ctx context.Context) {
	var hdr [virtioNetHdrSize]byte
	iov := make([][]byte, 0, 8)
	for {
		pkt := l.ep.ReadContext(ctx)
		if pkt == nil {
			return
		}
		iov = iov[:0]
		if l.vnet {
			vnetHeader(&hdr, pkt)
			iov = append(iov, hdr[:])
		}
		iov = append(iov, pkt.AsSlices()...)
		err := writePacket(l.rc, iov)
		pkt.DecRef()
		if err != nil {
			return
		}
	}
}

// writePacket writes one packet, its header and payload slices, in one
// writev (no copy into one buffer first), waiting through Go's poller
// while the device is full.
func writePacket(rc syscall.RawConn, iov [][]byte) error {
	var werr error
	err := rc.Write(func(fd uintptr) bool {
		_, werr = unix.Writev(int(fd), iov)
		return werr != unix.EAGAIN
	})
	if err != nil {
		return err
	}
	return werr
}

// inject hands one IP packet to the stack, by its version.
func (l *tunLink) inject(b []byte) {
	if len(b) == 0 {
		return
	}
	proto := header.IPv4ProtocolNumber
	switch header.IPVersion(b) {
	case header.IPv4Version:
	case header.IPv6Version:
		proto = header.IPv6ProtocolNumber
	default:
		return
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(b)})
	l.ep.InjectInbound(proto, pkt)
	pkt.DecRef()
}

// close closes the device (ending the reader and every write) and waits.
func (l *tunLink) close() {
	l.ep.Close()
	l.f.Close()
	l.wg.Wait()
}
