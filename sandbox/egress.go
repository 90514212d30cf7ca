package sandbox

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
