package proxy

import (
	"github.com/sandbox-run/sandbox-run/allowlist"
)

// Refusal reason codes. They appear in the X-Sandbox-Refusal header and in
// the "reason" field of audit lines; they are stable. The codes of the
// address classes are allowlist's.
const (
	reasonNotAllowed  = "not-allowed"  // host (or port) is not on the allow list
	reasonBadHost     = "bad-host"     // the target does not parse as a host, an address or a port
	reasonBadScheme   = "bad-scheme"   // plain proxy request for something other than http or https
	reasonDNS         = "dns-failure"  // the name did not resolve
	reasonDialRefused = "dial-refused" // the dialer's Control hook refused the address

	reasonPrivate     = allowlist.ReasonPrivate
	reasonUnspecified = allowlist.ReasonUnspecified
	reasonLoopback    = allowlist.ReasonLoopback
	reasonLinkLocal   = allowlist.ReasonLinkLocal
	reasonMetadata    = allowlist.ReasonMetadata
	reasonMulticast   = allowlist.ReasonMulticast
	reasonReserved    = allowlist.ReasonReserved
	reasonBroadcast   = allowlist.ReasonBroadcast
)

// ErrInvalidEntry is wrapped by every error New and SetAllow return for an
// allow-list entry they cannot accept (see allowlist.Parse for the syntax).
var ErrInvalidEntry = allowlist.ErrInvalidEntry

// target is a client's destination, as allowlist reads it.
type target = allowlist.Target

func parseTarget(hostport string, defaultPort uint16) (target, error) {
	return allowlist.ParseTarget(hostport, defaultPort)
}
