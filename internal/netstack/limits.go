//go:build linux

package netstack

import (
	"errors"
	"fmt"
)

// Limits bound what one sandbox can make the host side hold through its
// stack. A hostile command that opens connection after connection to an
// allowed host, and reads none of what arrives, fills every buffer on the
// way; without a bound the host's memory is the limit.
//
// Guaranteed: at most MaxConns connections are relayed at once (a
// connection holds its slot from its SYN, while the policy is asked and
// the upstream connection is opened, until both of its directions have
// ended and the sandbox has acknowledged the last data the stack sent it,
// or for at most lingerMax after the close, when it is reset); one more
// is reset before its handshake completes and reported
// through Config.Refused with ErrConnLimit. At most MaxPending SYNs are
// being handled at once; beyond that a SYN is dropped, as by a full listen
// backlog, and the client's retransmission tries again. Each connection's
// receive and send buffers are at most BufferMax bytes each, and its relay
// holds two copy buffers of RelayBuffer bytes. DNS over TCP has its own
// bound (maxDNSConns) under the same buffer ceiling.
//
// Not guaranteed: the bound counts buffered payload, as gVisor accounts
// it, and the relay's buffers; the Go runtime's and gVisor's overhead per
// connection (a few KiB: goroutines, endpoint state, segment headers) and
// the garbage collector's slack come on top. The upstream sockets' buffers
// are the host kernel's, bounded by its tcp_rmem and tcp_wmem, not here.
type Limits struct {
	// MaxConns is the most connections relayed at once; 0 means
	// DefaultMaxConns.
	MaxConns int
	// MaxPending is the most SYNs handled at once (the policy's
	// judgement and the upstream connect); 0 means DefaultMaxPending.
	MaxPending int
	// BufferMax is the ceiling, in bytes, of each connection's receive
	// and of its send buffer; 0 means DefaultBufferMax.
	BufferMax int
}

// The default limits: with them a sandbox's connections hold at most
// 128 * (2 * 1 MiB + 2 * 256 KiB) + 16 * 2 * 1 MiB = 352 MiB of data on
// the host side (Limits.MemoryBound; the second term is the resolver's
// TCP connections).
const (
	DefaultMaxConns   = 128
	DefaultMaxPending = 64
	DefaultBufferMax  = 1 << 20
	// RelayBuffer is the size of each of a connection's two copy
	// buffers: large copies hand the stack few, large writes.
	RelayBuffer = 256 << 10
	// maxDNSConns bounds the resolver's TCP connections at once; one
	// more is closed at once (the client falls back to UDP or retries).
	maxDNSConns = 16
	// minBuffer is the least buffer a connection gets (gVisor's own
	// minimum is 4 KiB); BufferMax below it is raised to it.
	minBuffer = 16 << 10
)

// ErrConnLimit is matched (errors.Is) by the error Config.Refused gets for
// a connection reset because MaxConns were already open: a
// *ConnLimitError.
var ErrConnLimit = errors.New("netstack: too many connections at once")

// ConnLimitError is a connection reset because Max were already open.
type ConnLimitError struct{ Max int }

func (e *ConnLimitError) Error() string { return "netstack: " + e.Why() }

// Why says why the connection was reset, without the package's prefix.
func (e *ConnLimitError) Why() string {
	return fmt.Sprintf("too many connections at once (%d open, the most transparent egress relays)", e.Max)
}

// Is matches ErrConnLimit.
func (e *ConnLimitError) Is(target error) bool { return target == ErrConnLimit }

// withDefaults fills the zero fields and clamps BufferMax.
func (l Limits) withDefaults() Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.MaxPending <= 0 {
		l.MaxPending = DefaultMaxPending
	}
	if l.BufferMax <= 0 {
		l.BufferMax = DefaultBufferMax
	}
	l.BufferMax = max(l.BufferMax, minBuffer)
	return l
}

// MemoryBound is the most bytes of data the stack's connections hold on
// the host side under l (zero fields taken as the defaults): every relayed
// connection and every DNS connection with both buffers full, and every
// relay with both copy buffers. See Limits for what it does not count.
func (l Limits) MemoryBound() int64 {
	l = l.withDefaults()
	perConn := int64(2*l.BufferMax + 2*RelayBuffer)
	return int64(l.MaxConns)*perConn + int64(maxDNSConns)*int64(2*l.BufferMax)
}

// String is the limits for a log line or a report.
func (l Limits) String() string {
	l = l.withDefaults()
	return fmt.Sprintf("%d connections (%d handshakes) at once, %d KiB buffers each way, at most %d MiB",
		l.MaxConns, l.MaxPending, l.BufferMax>>10, l.MemoryBound()>>20)
}

// slots counts the connections relayed at once.
type slots chan struct{}

// take claims a slot, or reports false when all are taken.
func (s slots) take() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

// give returns a slot.
func (s slots) give() { <-s }
