package policy

import (
	"strings"

	"github.com/sandbox-run/sandbox-run/httprule"
)

// validateHTTP checks the --allow-http rules as httprule reads them (the
// first bad one is named), the --upstream-ca path, and that the run has
// a built-in proxy to terminate TLS in: a node-wide proxy (EgressSocket)
// does not know the rules, and the modes without a mount namespace or
// without a proxy cannot put the run's CA where tools look.
func (p Policy) validateHTTP() error {
	for _, r := range p.AllowHTTP {
		if err := noNUL("allow-http", r); err != nil {
			return err
		}
		if _, err := httprule.Parse(r); err != nil {
			return invalid("allow-http", err.Error(), "write rules as 'METHODS HOST[:PORT]/PATH-GLOB', e.g. 'GET,HEAD api.github.com/repos/**'")
		}
	}
	if p.UpstreamCA != "" {
		if err := checkPath("upstream-ca", p.UpstreamCA); err != nil {
			return err
		}
		// Secrets' hosts (and the LLM provider's, without an LLM socket)
		// are terminated too, to swap the placeholder: their certificates
		// are checked with these roots.
		secretHosts := len(p.Secrets) > 0 || (p.LLMKeyEnv != "" && p.LLMSocket == "")
		if len(p.AllowHTTP) == 0 && !secretHosts {
			return invalid("upstream-ca", "no host is terminated, so no upstream certificate is checked", "pass --allow-http rules or --secret, or leave out --upstream-ca")
		}
	}
	if len(p.AllowHTTP) == 0 {
		return nil
	}
	if p.EgressSocket != "" {
		return invalid("allow-http", "a node-wide proxy (--egress-socket) does not apply this run's rules", "leave out --egress-socket, or give the rules to the node's proxy")
	}
	switch p.Sandbox {
	case ModeLandlock, ModeSeatbelt, ModeOff:
		return invalid("allow-http", "--sandbox "+strings.ToLower(string(p.Sandbox))+" cannot put the run's CA over the system certificate bundle, so TLS termination is not set up there",
			"use --sandbox bwrap or gvisor (or auto on Linux)")
	}
	return nil
}
