package hostnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/forwarder"
	"github.com/sandbox-run/sandbox-run/internal/connbroker"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/llm"
	"github.com/sandbox-run/sandbox-run/internal/netstack"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/internal/procid"
	"github.com/sandbox-run/sandbox-run/internal/refusals"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/proxy"
	"github.com/sandbox-run/sandbox-run/report"
)

// Where the forwarded sockets appear inside, and the loopback ports init
// listens on. The sandbox's network namespace is its own, so fixed ports
// cannot collide with anything.
const (
	egressInside = "/run/sandbox-run/egress.sock"
	llmInside    = "/run/sandbox-run/llm.sock"
	egressPort   = 3128
	llmPort      = 3129
)

// Network is the run's way out: the Unix sockets bound in, what init
// forwards, the variables that point the command at them, and what serves
// the sockets outside (the built-in proxy, or relays to the node's).
type Network struct {
	Mode     string // "none", "proxy (built-in)", "proxy (socket PATH)"
	Binds    [][2]string
	Forwards []initproc.Forward
	Publish  []initproc.Forward   // published ports (handin_linux.go)
	HandIn   *report.HandInReport // what was handed in; nil for nothing
	Env      map[string]string
	Proxy    *proxy.Proxy       // the built-in proxy, for its counts; nil otherwise
	Dir      string             // the run's runtime dir, removed by close or release
	unhold   func()             // drops the lock that marks Dir live (MakeRunDir), once it is removed
	swept    func()             // waits for the sweep of killed runs' dirs; nil before listen
	writable []string           // the run's writable dirs, which its TMPDIR must lie outside
	Tun      *Transparent       // transparent egress to attach (bwrap), nil for none
	Egress   report.Transparent // what the report says of transparent egress
	ctx      context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup

	caCovered []string // system CA bundle paths the run's bundle covers inside (tls_linux.go)
	closers   []func() // what Close releases last: the hand-ins' pinned sockets

	// The connect broker (broker_linux.go): the netstack once attached,
	// its dialer, and why the broker was lost after it was planned.
	stack      atomic.Pointer[netstack.Stack]
	dialer     *proxy.Transparent
	brokerLost atomic.Pointer[string]
	ports      connbroker.Ports // the local range brokered sockets are bound in

	// Where the netstack's own refusals go (egress_linux.go).
	audit   io.Writer
	runID   string
	refused *refusals.Collector
}

// Close stops what serves the sockets and removes the runtime directory.
func (n *Network) Close() {
	if n.stop != nil {
		n.stop()
		n.wg.Wait()
	}
	n.Release()
	if n.swept != nil {
		n.swept()
		n.swept = nil
	}
	for _, c := range n.closers {
		c()
	}
	n.closers = nil
}

// Counts is the built-in proxy's counts for the report, nil without one.
// Call it after Close, when every connection has ended and counted its
// bytes.
func (n *Network) Counts() *report.EgressCounts {
	if n == nil || n.Proxy == nil {
		return nil
	}
	c := n.Proxy.Counts()
	return &report.EgressCounts{Allowed: c.Allowed, Refused: c.Refused, BytesOut: c.BytesOut, BytesIn: c.BytesIn}
}

// Release removes the runtime directory once the sandbox holds its sockets
// by their bind mounts: the listeners keep serving the bound inodes, and a
// sandbox-run killed later leaves no directory behind.
func (n *Network) Release() {
	if n.Dir != "" {
		os.RemoveAll(n.Dir)
		n.Dir = ""
		n.unhold()
	}
}

// DirPrefix names a run's runtime directory in the host's temporary
// directory: DirPrefix+PID.START.NS-hRANDOM (see MakeRunDir).
const DirPrefix = "sandbox-run-net-"

// Listen creates the run's runtime directory on first use and a socket
// named name in it that only the sandbox's uid may reach. A TMPDIR inside
// a writable dir of the run is refused (checkTmpdir). The directory
// stays 0700 (MkdirTemp), and as root both are handed to that uid so that
// bwrap, running as it, can bind the socket. The directory is named for
// this process; the directories of killed runs are swept beside the
// run's set-up (startSweep): one that a SIGKILL left before release goes
// with the next run that makes one.
func (n *Network) Listen(name string, uid, gid int, root bool) (net.Listener, string, error) {
	return n.ListenOn("unix", name, uid, gid, root)
}

// ListenOn is listen for a Unix socket of the given network ("unix",
// "unixpacket").
func (n *Network) ListenOn(network, name string, uid, gid int, root bool) (net.Listener, string, error) {
	if n.Dir == "" {
		if err := CheckTmpdir(n.writable, "the run's proxy and relay sockets"); err != nil {
			return nil, "", err
		}
		me, _, err := procid.Self()
		if err != nil {
			return nil, "", fault.New("cannot read this process's start time", err.Error(), "mount /proc")
		}
		n.swept = StartSweep(os.TempDir(), DirPrefix, uid)
		dir, unhold, err := MakeRunDir(DirPrefix, me)
		if err != nil {
			return nil, "", fault.New("cannot create the run's runtime directory", err.Error(), "check that $TMPDIR is writable")
		}
		n.Dir, n.unhold = dir, unhold
		if err := plan.AccessibleAs(dir, uid, gid, false, nil); err != nil {
			why := err.Error()
			var se *fault.Error
			if errors.As(err, &se) {
				why = se.Why
			}
			return nil, "", fault.New("the run's runtime directory "+dir+" is out of reach of the sandbox", why,
				"point TMPDIR at a directory every user can search, such as /tmp")
		}
		if root {
			if err := os.Chown(dir, uid, gid); err != nil {
				return nil, "", fault.New("cannot hand the runtime directory to uid "+strconv.Itoa(uid), err.Error(), "check $TMPDIR")
			}
		}
		n.ctx, n.stop = context.WithCancel(context.Background())
	}
	path := filepath.Join(n.Dir, name)
	ln, err := net.Listen(network, path)
	if err != nil {
		return nil, "", fault.New("cannot listen on "+path, err.Error(), "check that $TMPDIR is writable")
	}
	err = os.Chmod(path, 0o600)
	if err == nil && root {
		err = os.Chown(path, uid, gid)
	}
	if err != nil {
		ln.Close()
		return nil, "", fault.New("cannot hand the socket "+path+" to uid "+strconv.Itoa(uid), err.Error(), "check $TMPDIR")
	}
	return ln, path, nil
}

// Serve runs f in the background until close.
func (n *Network) Serve(f func(ctx context.Context) error, log *slog.Logger, what string) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := f(n.ctx); err != nil {
			log.Warn(what+" stopped", "err", err)
		}
	}()
}

// relay serves a socket named name in the runtime directory that forwards
// each connection to the node's socket at target, dialled by path every
// time: a node proxy that is stopped, or whose socket is removed, is gone
// for the sandbox at once (new connections get a 502 from the forwarder),
// and one restarted at the same path is reached again. Binding target
// itself would pin the inode it had when the run started.
func (n *Network) relay(name, target string, uid, gid int, root bool, tag []byte, log *slog.Logger) (string, error) {
	ln, path, err := n.Listen(name, uid, gid, root)
	if err != nil {
		return "", err
	}
	n.Serve(func(ctx context.Context) error { return forwarder.ServeTagged(ctx, ln, target, tag) }, log, "relay to "+target)
	return path, nil
}

// SetupNetwork decides the run's network. With no allow-list, no egress
// socket and no LLM socket the sandbox has no network at all and nothing is
// forwarded (the fast path).
func SetupNetwork(ctx context.Context, p policy.Policy, uid, gid int, root bool, runID string, audit io.Writer, refused *refusals.Collector, log *slog.Logger, lookup func(string) (string, bool)) (_ *Network, err error) {
	n := &Network{Mode: "none", Env: map[string]string{}, writable: p.Writable(), audit: audit, runID: runID, refused: refused}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	sec, err := loadSecrets(p, lookup, n.Env)
	if err != nil {
		return nil, err
	}
	var egress string // the socket bound in as the egress proxy
	switch {
	case p.EgressSocket != "":
		if err := CheckSocket("--egress-socket", p.EgressSocket, uid, gid, root,
			"start the node's proxy (sandbox-run proxy --listen "+p.EgressSocket+") or fix the path"); err != nil {
			return nil, err
		}
		// The node's proxy learns which run each connection is from.
		tag := []byte(proxy.RunIDPreamble + runID + "\r\n")
		if egress, err = n.relay("egress.sock", p.EgressSocket, uid, gid, root, tag, log); err != nil {
			return nil, err
		}
		n.Mode = "proxy (socket " + p.EgressSocket + ")"
	case len(p.AllowHosts) > 0 || len(p.AllowHTTP) > 0:
		roots, err := upstreamRoots(p)
		if err != nil {
			return nil, err
		}
		px, err := proxy.New(llm.WithMeter(withSecrets(proxy.Config{Allow: p.AllowHosts, Audit: audit, Logger: log, RunID: runID, HTTPRules: p.AllowHTTP, UpstreamRoots: roots, Refusals: refused}, sec, runID), llm.Hosts(p), runID))
		if err != nil {
			return nil, &fault.Error{What: "--allow-host", Why: err.Error(), Fix: "write entries as host, host:port, host:*, *.domain, an IP or a CIDR"}
		}
		ln, path, err := n.Listen("egress.sock", uid, gid, root)
		if err != nil {
			return nil, err
		}
		if n.caCovered, err = n.trustRunCA(px, uid, gid, root); err != nil {
			return nil, err
		}
		egress = path
		n.Proxy = px
		n.Serve(func(ctx context.Context) error { return px.Serve(ctx, ln) }, log, "egress proxy")
		n.Mode = "proxy (built-in)"
	}
	if egress != "" {
		n.Binds = append(n.Binds, [2]string{egress, egressInside})
		n.Forwards = append(n.Forwards, initproc.Forward{Port: egressPort, Socket: egressInside})
		setProxyEnv(n.Env, "http://127.0.0.1:"+strconv.Itoa(egressPort))
	} else {
		setOfflineEnv(n.Env)
	}
	if p.LLMSocket != "" {
		if err := CheckSocket("--llm-socket", p.LLMSocket, uid, gid, root, "start the node's LLM proxy or fix the path"); err != nil {
			return nil, err
		}
		var llmPath string
		if audit != nil || p.LLMKeyEnv != "" {
			// With an audit or a key to add, an HTTP relay that records
			// each request.
			ln, path, err := n.Listen("llm.sock", uid, gid, root)
			if err != nil {
				return nil, err
			}
			n.Serve(func(ctx context.Context) error {
				return llm.Serve(ctx, ln, p.LLMSocket, runID, audit, log, llm.Key{Set: sec, Name: p.LLMKeyEnv})
			}, log, "LLM relay")
			llmPath = path
		} else if llmPath, err = n.relay("llm.sock", p.LLMSocket, uid, gid, root, nil, log); err != nil {
			return nil, err
		}
		n.Binds = append(n.Binds, [2]string{llmPath, llmInside})
		n.Forwards = append(n.Forwards, initproc.Forward{Port: llmPort, Socket: llmInside})
		setLLMEnv(n.Env, "http://127.0.0.1:"+strconv.Itoa(llmPort), p.LLMEnv)
		if n.Mode == "none" {
			n.Mode = "llm only"
		}
	}
	return n, nil
}

// CheckSocket fails closed when a socket the run depends on is missing,
// not a socket, not reachable for the sandbox's uid, or refusing.
func CheckSocket(flag, path string, uid, gid int, root bool, fix string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fault.New(flag+" "+path, "does not exist ("+fault.Reason(err)+")", fix)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fault.New(flag+" "+path, "is not a Unix socket", fix)
	}
	if err := plan.AccessibleAs(path, uid, gid, false, nil); err != nil {
		return err
	}
	if root && !socketWritableBy(fi, uid, gid) {
		return fault.New(flag+" "+path, fmt.Sprintf("uid %d, which the sandbox runs as, may not connect to it (connecting needs write permission)", uid),
			fmt.Sprintf("chown %d %s, or serve it with group access (sandbox-run proxy --mode 0660) to a group of uid %d", uid, path, uid))
	}
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return fault.New(flag+" "+path, "refuses connections ("+fault.Reason(err)+")", fix)
	}
	c.Close()
	return nil
}

func (n *Network) String() string { return fmt.Sprintf("network %s", n.Mode) }

func socketWritableBy(fi fs.FileInfo, uid, gid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return plan.Permits(uint32(fi.Mode().Perm()), st.Uid, st.Gid, uid, gid, 2)
}
