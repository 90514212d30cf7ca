package bwrap

import (
	"context"
	"fmt"
	"io"
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
	"github.com/sandbox-run/sandbox-run/mount"
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

// handIn sets up what the policy hands in from the host: the filtered
// ssh-agent and known_hosts, named sockets, host ports and published
// ports. Each is served by a relay on the host side in the run's runtime
// directory and bound in; the host paths are vetted by the plan's guard
// (never in or through a writable directory) and pinned by descriptor.
func (r *bwRun) handIn(context.Context) error {
	p, n := r.p, r.nw
	rep := &report.HandInReport{}
	steps := []func(*report.HandInReport) error{r.handInAgent, r.handInSockets, r.handInHostPorts, r.handInPublish}
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
func (r *bwRun) pin(flag, path string) (string, error) {
	res, err := r.pl.Guard.CheckRead(path)
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
	r.undo.Push(func() { f.Close() })
	return fmt.Sprintf("/proc/self/fd/%d", f.Fd()), nil
}

// handInAgent serves the filtered agent and binds known_hosts.
func (r *bwRun) handInAgent(rep *report.HandInReport) error {
	p, n := r.p, r.nw
	if p.SSHAgent == "" {
		return nil
	}
	target, err := r.pin("--ssh-agent", p.SSHAgent)
	if err != nil {
		return err
	}
	ln, path, err := n.Listen("ssh-agent.sock", r.uid, r.gid, r.root)
	if err != nil {
		return err
	}
	f := &agentfilter.Filter{Agent: target, Audit: r.opts.Audit, RunID: r.runID, Refusals: r.opts.Refusals, Logger: r.log}
	n.Serve(func(ctx context.Context) error { return f.Serve(ctx, ln) }, r.log, "ssh-agent filter")
	n.Binds = append(n.Binds, [2]string{path, agentInside})
	n.Env["SSH_AUTH_SOCK"] = agentInside
	rep.SSHAgent, rep.SSHAgentInside = p.SSHAgent, agentInside
	if p.SSHKnownHosts == "" {
		return nil
	}
	// A copy in the runtime directory, which the sandbox's uid can read
	// (the user's ~/.ssh is often not), bound read-only.
	if err := r.pl.Guard.CheckHost(p.SSHKnownHosts); err != nil {
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
	res, err := r.pl.Guard.CheckRead(cp)
	if err != nil {
		return plan.GuardErr(err)
	}
	if err := r.pl.Bind(mount.ROBind, res, knownHostsInside); err != nil {
		return fault.New("cannot open "+cp, err.Error(), "check $TMPDIR")
	}
	// ssh finds ~ in the password file, not $HOME, so the file is named
	// to it: git's ssh through GIT_SSH_COMMAND.
	if _, set := p.Env["GIT_SSH_COMMAND"]; !set {
		n.Env["GIT_SSH_COMMAND"] = "ssh -o UserKnownHostsFile=" + knownHostsInside
	}
	rep.KnownHosts, rep.KnownHostsInside = p.SSHKnownHosts, knownHostsInside
	return nil
}

// handInSockets relays each named socket, refusing one that grants host
// root unless it was named unsafe.
func (r *bwRun) handInSockets(rep *report.HandInReport) error {
	paths, unsafe := r.p.HandInSockets()
	for i, sp := range paths {
		target, err := r.pin("--unix-socket", sp)
		if err != nil {
			return err
		}
		why := grantsRoot(sp, target)
		if why != "" && !unsafe[sp] {
			r.opts.Refusals.Add(refusals.Refusal{Kind: refusals.KindSocket, Host: sp, Reason: "socket-grants-root", Why: why,
				Fix: "--unix-socket-unsafe " + sp})
			return fault.New("--unix-socket "+sp, "refused: it "+why+", so the command would have host root",
				"leave it out, or pass --unix-socket-unsafe "+sp+" to hand it in anyway (the report names it unsafe)")
		}
		ln, path, err := r.nw.Listen("unix-"+strconv.Itoa(i)+".sock", r.uid, r.gid, r.root)
		if err != nil {
			return err
		}
		al := &auditListener{Listener: ln, audit: r.opts.Audit, runID: r.runID, event: "unix_socket", fields: map[string]any{"path": sp, "unsafe": why != ""}}
		r.nw.Serve(func(ctx context.Context) error { return forwarder.Serve(ctx, al, target) }, r.log, "relay to "+sp)
		r.nw.Binds = append(r.nw.Binds, [2]string{path, sp})
		rep.Sockets = append(rep.Sockets, report.SocketHandIn{Path: sp, Unsafe: why != "", Why: why})
	}
	return nil
}

// handInHostPorts relays each host port: init listens at the address
// inside, the relay outside dials the same address on the host.
func (r *bwRun) handInHostPorts(rep *report.HandInReport) error {
	for i, h := range r.p.HostPorts {
		ap, err := policy.ParseHostPort(h)
		if err != nil {
			return fault.New("--host-port "+h, err.Error(), "write --host-port PORT or ADDR:PORT")
		}
		ln, path, err := r.nw.Listen("host-"+strconv.Itoa(i)+".sock", r.uid, r.gid, r.root)
		if err != nil {
			return err
		}
		al := &auditListener{Listener: ln, audit: r.opts.Audit, runID: r.runID, event: "host_port", fields: map[string]any{"addr": ap.String()}}
		r.nw.Serve(func(ctx context.Context) error { return forwarder.ServeTCP(ctx, al, ap.String()) }, r.log, "host port "+ap.String())
		inside := handInDir + "host-" + strconv.Itoa(i) + ".sock"
		r.nw.Binds = append(r.nw.Binds, [2]string{path, inside})
		addr := ap.Addr().String()
		if h == strconv.Itoa(int(ap.Port())) {
			addr = "" // PORT alone: 127.0.0.1 and ::1, as the proxy's port
		}
		r.nw.Forwards = append(r.nw.Forwards, initproc.Forward{Port: int(ap.Port()), Socket: inside, Addr: addr})
		rep.HostPorts = append(rep.HostPorts, ap.String())
	}
	return nil
}

// handInPublish listens on the host's loopback for each published port
// and pairs its clients with the data connections init opens.
func (r *bwRun) handInPublish(rep *report.HandInReport) error {
	for i, s := range r.p.Publish {
		in, host, err := policy.ParsePublish(s)
		if err != nil {
			return fault.New("--publish "+s, err.Error(), "write --publish PORT or PORT:HOSTPORT")
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(host)))
		tcp, err := net.Listen("tcp4", addr)
		if err != nil {
			return fault.New("--publish "+s, "cannot listen on the host's "+addr+": "+fault.Reason(err), "publish on a free host port: --publish "+strconv.Itoa(int(in))+":HOSTPORT")
		}
		ln, path, err := r.nw.Listen("publish-"+strconv.Itoa(i)+".sock", r.uid, r.gid, r.root)
		if err != nil {
			tcp.Close()
			return err
		}
		aw, runID := r.opts.Audit, r.runID
		onConn := func(a net.Addr) {
			audit.Event(aw, runID, "publish", map[string]any{"host": addr, "inside": int(in), "peer": a.String(), "decision": "allow"})
		}
		r.nw.Serve(func(ctx context.Context) error { return forwarder.ServePublished(ctx, tcp, ln, onConn) }, r.log, "published port "+addr)
		inside := handInDir + "publish-" + strconv.Itoa(i) + ".sock"
		r.nw.Binds = append(r.nw.Binds, [2]string{path, inside})
		r.nw.Publish = append(r.nw.Publish, initproc.Forward{Port: int(in), Socket: inside})
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
