package hostnet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sandbox-run/sandbox-run/forwarder"
	"github.com/sandbox-run/sandbox-run/internal/agentfilter"
	"github.com/sandbox-run/sandbox-run/internal/audit"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/internal/refusals"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// Where the hand-ins appear inside.
const (
	agentInside      = "/run/sandbox-run/ssh-agent.sock"
	knownHostsInside = "/run/sandbox-run/ssh/known_hosts"
	handInDir        = "/run/sandbox-run/"

	// maxKnownHosts bounds the known_hosts file copied in.
	maxKnownHosts = 4 << 20
)

// handIns is one run's hand-ins being set up on its network.
type handIns struct {
	n   *Network
	p   policy.Policy
	req Request
	run Run
	log *slog.Logger
}

// handIn sets up what the policy hands in from the host: the filtered
// ssh-agent and known_hosts, named sockets, host ports and published
// ports. Each is served by a relay on the host side in the run's runtime
// directory and bound in; the host paths are vetted by req.Guard, the
// plan's (never in or through a writable directory), and pinned by
// descriptor. A mechanism binds n.Binds and gives init n.Forwards and
// n.Publish, whatever the hand-ins are.
func (n *Network) handIn(p policy.Policy, req Request, run Run) error {
	h := handIns{n: n, p: p, req: req, run: run, log: run.logger()}
	rep := &report.HandInReport{}
	steps := []func(*report.HandInReport) error{h.agent, h.sockets, h.hostPorts, h.publish}
	for _, s := range steps {
		if err := s(rep); err != nil {
			return err
		}
	}
	if p.HandIn.SSHAgent != "" || len(rep.Sockets)+len(rep.HostPorts)+len(rep.Published) > 0 {
		n.HandIn = rep
	}
	return nil
}

// pin vets a host socket the relay will dial and pins it: the relay
// dials /proc/self/fd/N of an O_PATH descriptor of the inode checked, so
// a socket swapped at the path later is not reached (nor is a server
// restarted there).
func (h handIns) pin(flag, path string) (string, error) {
	res, err := h.req.Guard.CheckRead(path)
	if err != nil {
		return "", plan.GuardErr(err)
	}
	if !res.Exists {
		return "", fault.New(flag+" "+path, "does not exist", "start what serves it, or fix the path")
	}
	f, err := res.Open()
	if err != nil {
		return "", fault.New(flag+" "+path, err.Error(), "fix the path")
	}
	fi, err := os.Stat(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil || fi.Mode().Type() != os.ModeSocket {
		f.Close()
		return "", fault.New(flag+" "+path, "is not a Unix socket", "name the socket itself")
	}
	h.n.closers = append(h.n.closers, func() { f.Close() })
	return fmt.Sprintf("/proc/self/fd/%d", f.Fd()), nil
}

// agent serves the filtered agent and binds known_hosts.
func (h handIns) agent(rep *report.HandInReport) error {
	p, n, req := h.p, h.n, h.req
	if p.SSHAgent == "" {
		return nil
	}
	target, err := h.pin("--ssh-agent", p.SSHAgent)
	if err != nil {
		return err
	}
	ln, path, err := n.Listen("ssh-agent.sock", req.UID, req.GID, req.Root)
	if err != nil {
		return err
	}
	f := &agentfilter.Filter{Agent: target, Audit: h.run.Audit, RunID: h.run.RunID, Refusals: h.run.Refusals, Logger: h.log}
	n.Serve(func(ctx context.Context) error { return f.Serve(ctx, ln) }, h.log, "ssh-agent filter")
	n.Binds = append(n.Binds, [2]string{path, agentInside})
	n.Env["SSH_AUTH_SOCK"] = agentInside
	rep.SSHAgent, rep.SSHAgentInside = p.SSHAgent, agentInside
	if p.SSHKnownHosts == "" {
		return nil
	}
	// A copy in the runtime directory, which the sandbox's uid can read
	// (the user's ~/.ssh is often not), bound read-only.
	if err := req.Guard.CheckHost(p.SSHKnownHosts); err != nil {
		return plan.GuardErr(err)
	}
	kh, err := pathguard.OpenFile(p.SSHKnownHosts, os.O_RDONLY, 0)
	if err != nil {
		return fault.New("cannot read "+p.SSHKnownHosts, err.Error(), "fix the path, or leave out --ssh-agent")
	}
	text, err := io.ReadAll(io.LimitReader(kh, maxKnownHosts+1))
	kh.Close()
	if err != nil || len(text) > maxKnownHosts {
		return fault.New("cannot read "+p.SSHKnownHosts, fmt.Sprintf("unreadable or larger than %d bytes", maxKnownHosts), "trim it")
	}
	cp := filepath.Join(n.Dir, "known_hosts")
	if err := os.WriteFile(cp, text, 0o644); err != nil {
		return fault.New("cannot copy "+p.SSHKnownHosts, err.Error(), "check that $TMPDIR is writable")
	}
	// Bound read-only like the run's sockets, by the mechanism.
	n.Binds = append(n.Binds, [2]string{cp, knownHostsInside})
	// ssh finds ~ in the password file, not $HOME, so the file is named
	// to it: git's ssh through GIT_SSH_COMMAND.
	if _, set := p.Env["GIT_SSH_COMMAND"]; !set {
		n.Env["GIT_SSH_COMMAND"] = "ssh -o UserKnownHostsFile=" + knownHostsInside
	}
	rep.KnownHosts, rep.KnownHostsInside = p.SSHKnownHosts, knownHostsInside
	return nil
}

// sockets relays each named socket, refusing one that grants host root
// unless it was named unsafe.
func (h handIns) sockets(rep *report.HandInReport) error {
	n, req, run := h.n, h.req, h.run
	paths, unsafe := h.p.HandInSockets()
	for i, sp := range paths {
		target, err := h.pin("--unix-socket", sp)
		if err != nil {
			return err
		}
		why := grantsRoot(sp, target)
		if why != "" && !unsafe[sp] {
			run.Refusals.Add(refusals.Refusal{Kind: refusals.KindSocket, Host: sp, Reason: "socket-grants-root", Why: why,
				Fix: "--unix-socket-unsafe " + sp})
			return fault.New("--unix-socket "+sp, "refused: it "+why+", so the command would have host root",
				"leave it out, or pass --unix-socket-unsafe "+sp+" to hand it in anyway (the report names it unsafe)")
		}
		ln, path, err := n.Listen("unix-"+strconv.Itoa(i)+".sock", req.UID, req.GID, req.Root)
		if err != nil {
			return err
		}
		al := &auditListener{Listener: ln, audit: run.Audit, runID: run.RunID, event: "unix_socket", fields: map[string]any{"path": sp, "unsafe": why != ""}}
		n.Serve(func(ctx context.Context) error { return forwarder.Serve(ctx, al, target) }, h.log, "relay to "+sp)
		n.Binds = append(n.Binds, [2]string{path, sp})
		rep.Sockets = append(rep.Sockets, report.SocketHandIn{Path: sp, Unsafe: why != "", Why: why})
	}
	return nil
}

// hostPorts relays each host port: init listens at the address inside,
// the relay outside dials the same address on the host.
func (h handIns) hostPorts(rep *report.HandInReport) error {
	n, req, run := h.n, h.req, h.run
	for i, hp := range h.p.HostPorts {
		ap, err := policy.ParseHostPort(hp)
		if err != nil {
			return fault.New("--host-port "+hp, err.Error(), "write --host-port PORT or ADDR:PORT")
		}
		ln, path, err := n.Listen("host-"+strconv.Itoa(i)+".sock", req.UID, req.GID, req.Root)
		if err != nil {
			return err
		}
		al := &auditListener{Listener: ln, audit: run.Audit, runID: run.RunID, event: "host_port", fields: map[string]any{"addr": ap.String()}}
		n.Serve(func(ctx context.Context) error { return forwarder.ServeTCP(ctx, al, ap.String()) }, h.log, "host port "+ap.String())
		inside := handInDir + "host-" + strconv.Itoa(i) + ".sock"
		n.Binds = append(n.Binds, [2]string{path, inside})
		addr := ap.Addr().String()
		if hp == strconv.Itoa(int(ap.Port())) {
			addr = "" // PORT alone: 127.0.0.1 and ::1, as the proxy's port
		}
		n.Forwards = append(n.Forwards, initproc.Forward{Port: int(ap.Port()), Socket: inside, Addr: addr})
		rep.HostPorts = append(rep.HostPorts, ap.String())
	}
	return nil
}

// publish listens on the host's loopback for each published port and
// pairs its clients with the data connections init opens.
func (h handIns) publish(rep *report.HandInReport) error {
	n, req := h.n, h.req
	for i, s := range h.p.Publish {
		in, host, err := policy.ParsePublish(s)
		if err != nil {
			return fault.New("--publish "+s, err.Error(), "write --publish PORT or PORT:HOSTPORT")
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(host)))
		tcp, err := net.Listen("tcp4", addr)
		if err != nil {
			return fault.New("--publish "+s, "cannot listen on the host's "+addr+": "+fault.Reason(err), "publish on a free host port: --publish "+strconv.Itoa(int(in))+":HOSTPORT")
		}
		ln, path, err := n.Listen("publish-"+strconv.Itoa(i)+".sock", req.UID, req.GID, req.Root)
		if err != nil {
			tcp.Close()
			return err
		}
		aw, runID := h.run.Audit, h.run.RunID
		onConn := func(a net.Addr) {
			audit.Event(aw, runID, "publish", map[string]any{"host": addr, "inside": int(in), "peer": a.String(), "decision": "allow"})
		}
		n.Serve(func(ctx context.Context) error { return forwarder.ServePublished(ctx, tcp, ln, onConn) }, h.log, "published port "+addr)
		inside := handInDir + "publish-" + strconv.Itoa(i) + ".sock"
		n.Binds = append(n.Binds, [2]string{path, inside})
		n.Publish = append(n.Publish, initproc.Forward{Port: int(in), Socket: inside})
		rep.Published = append(rep.Published, report.PublishedReport{Inside: int(in), Host: addr})
	}
	return nil
}

// grantsRoot says why the socket at path (dialled at target) grants host
// root, "" when nothing says it does: by its name, and by the identity
// of the process listening on it, where the kernel tells it.
func grantsRoot(path, target string) string {
	if why := policy.RootSocket(path); why != "" {
		return why
	}
	return rootSocketByPeer(target)
}
