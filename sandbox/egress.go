package sandbox

// Transparent is what the report says of transparent egress: whether
// any TCP connection of the command (no proxy variables needed) goes out
// through the host side's netstack, judged like the HTTP proxy's, and
// if not, why (the mechanism cannot have it, or the run cannot).
type Transparent struct {
	// Enabled is set when any TCP connection inside goes out through
	// sandbox-run's TUN device and resolver, judged like the proxy's.
	Enabled bool `json:"transparent"`
	// Reason says why it is not, when it is not.
	Reason string `json:"reason,omitempty"`
}

// Why the mechanisms without a TUN device on the host side have no
// transparent egress: only tools that use the proxy variables get out.
const (
	noTransparentLandlock = "no network namespace under Landlock: TCP connect is confined to the proxy's port, so only tools that use the HTTP proxy variables get out"
	noTransparentSeatbelt = "no network namespace under Seatbelt: the profile allows only the proxy's loopback port, so only tools that use the HTTP proxy variables get out"
)

// transparentLost is the report's Transparent for a mechanism that has
// none, or nil when the run has no network to speak of.
func transparentLost(network, why string) *Transparent {
	if network == "none" || network == "" {
		return nil
	}
	return &Transparent{Reason: why}
}
