package policy

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
)

// HandIn is what a policy hands in to the sandbox from the host besides
// files: each is relayed by sandbox-run on the host side, audited, and
// named in the report.
type HandIn struct {
	// SSHAgent is the user's ssh-agent socket; the command gets a filtered
	// agent (keys listed, signatures made, nothing added, removed or
	// locked) at a fixed path in SSH_AUTH_SOCK.
	SSHAgent string `json:"ssh_agent,omitempty"`
	// SSHKnownHosts is a known_hosts file bound read-only where ssh
	// inside reads it.
	SSHKnownHosts string `json:"ssh_known_hosts,omitempty"`
	// UnixSockets are host Unix sockets handed in at their own paths, one
	// relayed connection each; nothing else of their directories. A socket
	// that grants host root (docker.sock and the like) is refused here.
	UnixSockets []string `json:"unix_sockets,omitempty"`
	// UnixSocketsUnsafe are sockets handed in although they grant host
	// root; the report names each as such.
	UnixSocketsUnsafe []string `json:"unix_sockets_unsafe,omitempty"`
	// HostPorts are services on the host's loopback made reachable inside
	// at the same address: "PORT" (127.0.0.1) or "ADDR:PORT" with ADDR a
	// loopback address ([::1]:PORT for IPv6).
	HostPorts []string `json:"host_ports,omitempty"`
	// Publish are servers inside made reachable on the host's loopback:
	// "PORT" (127.0.0.1:PORT on the host) or "PORT:HOSTPORT".
	Publish []string `json:"publish,omitempty"`
}

// ReservedPorts are the loopback ports sandbox-run's own init listens on
// inside (the egress proxy, the LLM channel): no host port may take them.
var reservedPorts = map[uint16]string{3128: "the egress proxy", 3129: "the LLM channel"}

// ParseHostPort reads a HostPorts entry: "PORT" is 127.0.0.1:PORT.
func ParseHostPort(s string) (netip.AddrPort, error) {
	if p, err := parsePort(s); err == nil {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), p), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("%q is not PORT or ADDR:PORT", s)
	}
	if !ap.Addr().Unmap().IsLoopback() {
		return netip.AddrPort{}, fmt.Errorf("%s is not a loopback address; only the host's loopback services are handed in", ap.Addr())
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

// ParsePublish reads a Publish entry: the port inside, and the host's
// loopback port (the same when not given).
func ParsePublish(s string) (inside, host uint16, err error) {
	in, out, two := strings.Cut(s, ":")
	if inside, err = parsePort(in); err == nil && two {
		host, err = parsePort(out)
	} else {
		host = inside
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%q is not PORT or PORT:HOSTPORT", s)
	}
	return inside, host, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != s {
		return 0, fmt.Errorf("%q is not a port from 1 to 65535", s)
	}
	return uint16(n), nil
}

// validateHandIn checks the hand-ins' values, and refuses them under a
// mechanism that does not hold them yet.
func (p Policy) validateHandIn() error {
	for _, f := range []struct {
		field string
		paths []string
	}{{"ssh-agent", []string{p.SSHAgent}}, {"ssh-known-hosts", []string{p.SSHKnownHosts}},
		{"unix-socket", p.UnixSockets}, {"unix-socket-unsafe", p.UnixSocketsUnsafe}} {
		for _, s := range f.paths {
			if s == "" && f.field[0] == 's' {
				continue
			}
			if err := checkPath(f.field, s); err != nil {
				return err
			}
		}
	}
	seen := map[netip.AddrPort]bool{}
	for _, h := range p.HostPorts {
		ap, err := ParseHostPort(h)
		if err != nil {
			return invalid("host-port", err.Error(), "write --host-port 5432 or --host-port 127.0.0.1:5432")
		}
		if what, ok := reservedPorts[ap.Port()]; ok {
			return invalid("host-port", fmt.Sprintf("port %d is where sandbox-run's init serves %s inside", ap.Port(), what),
				"serve the host's service on another port")
		}
		if seen[ap] {
			return invalid("host-port", h+" given twice", "give each once")
		}
		seen[ap] = true
	}
	hostSeen := map[uint16]bool{}
	for _, s := range p.Publish {
		_, host, err := ParsePublish(s)
		if err != nil {
			return invalid("publish", err.Error(), "write --publish 8080 or --publish 8080:18080")
		}
		if seen[netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), host)] {
			return invalid("publish", fmt.Sprintf("host port %d is also a --host-port: the sandbox would reach itself", host),
				"publish on another host port: --publish PORT:HOSTPORT")
		}
		if hostSeen[host] {
			return invalid("publish", fmt.Sprintf("host port %d published twice", host), "publish each host port once")
		}
		hostSeen[host] = true
	}
	if p.hasHandIn() && p.Sandbox != "" && p.Sandbox != ModeAuto && p.Sandbox != ModeBwrap && p.Sandbox != ModeGvisor {
		return invalid("sandbox", fmt.Sprintf("%s does not hand in sockets, the ssh-agent or ports yet", p.Sandbox),
			"use --sandbox bwrap or --sandbox gvisor, or leave out --ssh-agent, --unix-socket, --host-port and --publish")
	}
	return nil
}

func (p Policy) hasHandIn() bool {
	h := p.HandIn
	return h.SSHAgent != "" || len(h.UnixSockets)+len(h.UnixSocketsUnsafe)+len(h.HostPorts)+len(h.Publish) > 0
}

// HandInSockets lists the sockets to hand in, each with whether it was
// named unsafe, cleaned, each once.
func (p Policy) HandInSockets() (paths []string, unsafe map[string]bool) {
	unsafe = map[string]bool{}
	for _, s := range p.UnixSocketsUnsafe {
		unsafe[filepath.Clean(s)] = true
	}
	seen := map[string]bool{}
	for _, s := range append(append([]string(nil), p.UnixSockets...), p.UnixSocketsUnsafe...) {
		s = filepath.Clean(s)
		if !seen[s] {
			seen[s] = true
			paths = append(paths, s)
		}
	}
	return paths, unsafe
}
