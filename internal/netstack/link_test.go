//go:build linux

package netstack

import (
	"encoding/binary"
	"testing"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// tcpPacket builds an IPv4 TCP packet as the stack hands it to the link
// with checksum offload: the TCP checksum field left zero.
func tcpPacket(payload []byte) *stack.PacketBuffer {
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		ReserveHeaderBytes: header.IPv4MinimumSize + header.TCPMinimumSize,
		Payload:            buffer.MakeWithData(payload),
	})
	tcp := header.TCP(pkt.TransportHeader().Push(header.TCPMinimumSize))
	tcp.Encode(&header.TCPFields{SrcPort: 80, DstPort: 40000, SeqNum: 7, AckNum: 9,
		DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagAck, WindowSize: 1000})
	pkt.TransportProtocolNumber = header.TCPProtocolNumber
	ip := header.IPv4(pkt.NetworkHeader().Push(header.IPv4MinimumSize))
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(pkt.Size()), TTL: 64, Protocol: uint8(header.TCPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4([4]byte{198, 19, 0, 1}), DstAddr: tcpip.AddrFrom4([4]byte{10, 0, 2, 15})})
	pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
	return pkt
}

// TestVnetHeaderChecksum: what vnetHeader asks of the kernel (sum from
// csum_start to the end, store the complement at csum_start+csum_offset)
// yields a valid TCP checksum; without that completion the packet's
// checksum is not valid (the control: offload is what makes it right).
func TestVnetHeaderChecksum(t *testing.T) {
	payload := []byte("some bytes of a download, odd length")
	pkt := tcpPacket(payload)
	defer pkt.DecRef()
	var hdr [virtioNetHdrSize]byte
	vnetHeader(&hdr, pkt)
	if hdr[0] != virtioNetHdrNeedsCsum {
		t.Fatalf("flags %#x, want NEEDS_CSUM", hdr[0])
	}
	start := int(binary.NativeEndian.Uint16(hdr[6:]))
	off := int(binary.NativeEndian.Uint16(hdr[8:]))
	if start != header.IPv4MinimumSize || off != header.TCPChecksumOffset {
		t.Fatalf("csum_start %d csum_offset %d", start, off)
	}
	b := pkt.ToView().AsSlice()
	ip := header.IPv4(b)
	tcp := header.TCP(b[start:])
	valid := func() bool {
		return tcp.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(payload, 0), uint16(len(payload)))
	}
	if valid() {
		t.Fatal("control: the checksum is valid before the kernel completes it (untested)")
	}
	// The kernel's completion of CHECKSUM_PARTIAL.
	binary.BigEndian.PutUint16(b[start+off:], ^checksum.Checksum(b[start:], 0))
	if !valid() {
		t.Fatal("the completed checksum is not valid: the pseudo-header sum vnetHeader wrote is wrong")
	}
}

// TestVnetHeaderOther: a packet that is neither TCP nor UDP gets no flags.
func TestVnetHeaderOther(t *testing.T) {
	pkt := tcpPacket(nil)
	defer pkt.DecRef()
	pkt.TransportProtocolNumber = header.ICMPv4ProtocolNumber
	hdr := [virtioNetHdrSize]byte{1, 2, 3}
	vnetHeader(&hdr, pkt)
	if hdr != ([virtioNetHdrSize]byte{}) {
		t.Fatalf("header %v, want zeros", hdr)
	}
}

// TestLimits: zero fields take the defaults, a tiny buffer is raised to
// the minimum, and the bound is the documented product.
func TestLimits(t *testing.T) {
	if got := (Limits{}).MemoryBound(); got != 352<<20 {
		t.Errorf("default bound %d MiB, want 352 (the figure the docs give)", got>>20)
	}
	l := Limits{MaxConns: 16, BufferMax: 1}.withDefaults()
	if l.MaxConns != 16 || l.MaxPending != DefaultMaxPending || l.BufferMax != minBuffer {
		t.Errorf("withDefaults: %+v", l)
	}
	want := int64(16*(2*minBuffer+2*RelayBuffer) + maxDNSConns*2*minBuffer)
	if got := (Limits{MaxConns: 16, BufferMax: 1}).MemoryBound(); got != want {
		t.Errorf("bound %d, want %d", got, want)
	}
}
