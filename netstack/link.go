//go:build linux

package netstack

import (
	"context"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// tunLink moves packets between the TUN device and the stack: a reader
// that injects each packet the sandbox sent, a writer that writes each
// packet the stack sends. It is ours rather than gVisor's fdbased link so
// that every descriptor it uses is one it closes (fdbased leaves an
// eventfd open per stack), and so that the device is read through Go's
// poller.
type tunLink struct {
	ep *channel.Endpoint
	f  *os.File
	wg sync.WaitGroup
}

// queueLen is how many packets the stack may have queued for the device;
// beyond it a packet is dropped, which TCP recovers like a loss.
const queueLen = 1024

func newTunLink(fd int, mtu uint32) *tunLink {
	ep := channel.New(queueLen, mtu, "")
	// The kernel checked what it wrote to the device.
	ep.LinkEPCapabilities = stack.CapabilityRXChecksumOffload
	return &tunLink{ep: ep, f: os.NewFile(uintptr(fd), "tun")}
}

// start runs the reader and the writer until ctx ends or the device
// fails.
func (l *tunLink) start(ctx context.Context, mtu uint32) {
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		buf := make([]byte, mtu)
		for {
			n, err := l.f.Read(buf)
			if err != nil {
				return
			}
			l.inject(buf[:n])
		}
	}()
	go func() {
		defer l.wg.Done()
		rc, err := l.f.SyscallConn()
		if err != nil {
			return
		}
		for {
			pkt := l.ep.ReadContext(ctx)
			if pkt == nil {
				return
			}
			err := writePacket(rc, pkt.AsSlices())
			pkt.DecRef()
			if err != nil {
				return
			}
		}
	}()
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

// close closes the device (ending the reader) and waits for both.
func (l *tunLink) close() {
	l.ep.Close()
	l.f.Close()
	l.wg.Wait()
}
