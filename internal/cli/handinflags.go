package cli

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/policy"
)

// handInFlags are the run flags that hand host things in: the ssh-agent,
// named sockets, host ports, published ports.
type handInFlags struct {
	agent                               bool
	sockets, unsafe, hostPorts, publish []string
}

func (h *handInFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&h.agent, "ssh-agent", false, "hand in your ssh-agent ($SSH_AUTH_SOCK) through a filter: keys listed and used to sign, nothing added, removed or locked; ~/.ssh/known_hosts read-only")
	fs.StringArrayVar(&h.sockets, "unix-socket", nil, "hand in this host Unix socket at its path, audited per connection (repeatable); docker.sock and the like are refused")
	fs.StringArrayVar(&h.unsafe, "unix-socket-unsafe", nil, "hand in a socket that grants host root (docker.sock...) anyway; the report says so (repeatable)")
	fs.StringArrayVar(&h.hostPorts, "host-port", nil, "make the host's loopback service PORT (or ADDR:PORT) reachable inside at the same address (repeatable)")
	fs.StringArrayVar(&h.publish, "publish", nil, "make the server on PORT inside reachable at 127.0.0.1:PORT (or PORT:HOSTPORT) on the host (repeatable)")
}

// sshAgent sets the policy's agent from $SSH_AUTH_SOCK and its
// known_hosts from ~/.ssh/known_hosts when there is one.
func (h *handInFlags) sshAgent(p *policy.Policy, lookup func(string) (string, bool)) error {
	if !h.agent {
		return nil
	}
	sock, ok := lookup("SSH_AUTH_SOCK")
	if !ok || sock == "" {
		return errors.New("--ssh-agent: SSH_AUTH_SOCK is not set, so there is no agent to hand in; fix: start one (eval $(ssh-agent); ssh-add) or leave out --ssh-agent")
	}
	a, err := absPath("ssh-agent", sock)
	if err != nil {
		return err
	}
	p.SSHAgent = a
	if home, ok := lookup("HOME"); ok && filepath.IsAbs(home) {
		kh := filepath.Join(home, ".ssh", "known_hosts")
		if fi, err := os.Stat(kh); err == nil && fi.Mode().IsRegular() {
			p.SSHKnownHosts = kh
		}
	}
	return nil
}
