package sandbox

// TLSReport says what the built-in egress proxy terminates (--allow-http)
// and how the sandbox was made to trust it. Rules and hosts are named;
// no key or secret value is ever part of it.
type TLSReport struct {
	// Terminated are the host:port pairs whose TLS the proxy terminates
	// with the run's CA; every other host is a plain tunnel.
	Terminated []string `json:"terminated"`
	// Rules are the --allow-http rules in force, as written.
	Rules []string `json:"rules"`
	// UpstreamRoots is "system" or the --upstream-ca file that verifies
	// the terminated hosts.
	UpstreamRoots string `json:"upstream_roots"`
	// CABundle is the path inside of the bundle (system roots plus the
	// run's CA) that CAEnv point at.
	CABundle string   `json:"ca_bundle"`
	CAEnv    []string `json:"ca_env"`
	// Covered are the system bundle paths the run's bundle is bound over
	// inside, read-only (those the host has).
	Covered []string `json:"covered,omitempty"`
}

// rules is nil-safe, for the environment digest.
func (t *TLSReport) rules() []string {
	if t == nil {
		return nil
	}
	return sorted(t.Rules)
}
