package sandbox

// HandInReport is what a run handed in from the host: each relayed by
// sandbox-run on the host side and audited.
type HandInReport struct {
	// SSHAgent is the agent socket handed in through the filter (keys
	// listed, signatures made; nothing else), at SSHAgentInside.
	SSHAgent       string `json:"ssh_agent,omitempty"`
	SSHAgentInside string `json:"ssh_agent_inside,omitempty"`
	// KnownHosts is the known_hosts file bound read-only at
	// KnownHostsInside (GIT_SSH_COMMAND points ssh at it).
	KnownHosts       string `json:"known_hosts,omitempty"`
	KnownHostsInside string `json:"known_hosts_inside,omitempty"`
	// Sockets are the named Unix sockets handed in at their own paths.
	Sockets []SocketHandIn `json:"sockets,omitempty"`
	// HostPorts are host loopback services reachable inside at the same
	// address; Published are servers inside reachable on the host.
	HostPorts []string          `json:"host_ports,omitempty"`
	Published []PublishedReport `json:"published,omitempty"`
}

// SocketHandIn is one named socket handed in.
type SocketHandIn struct {
	// Path is the host socket, at the same path inside.
	Path string `json:"path"`
	// Unsafe is set for a socket that grants host root, handed in because
	// --unix-socket-unsafe named it; Why says how it was recognised.
	Unsafe bool   `json:"unsafe,omitempty"`
	Why    string `json:"why,omitempty"`
}

// PublishedReport is one published port.
type PublishedReport struct {
	Inside int    `json:"inside"` // the server's port inside (127.0.0.1)
	Host   string `json:"host"`   // where the host reaches it
}
