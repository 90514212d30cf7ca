package sandbox

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
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/proxy"
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

// network is the run's way out: the Unix sockets bound in, what init
// forwards, the variables that point the command at them, and the built-in
// proxy when the run serves its own.
type network struct {
	mode     string // "none", "proxy (built-in)", "proxy (socket PATH)"
	binds    [][2]string
	forwards []initproc.Forward
	env      map[string]string
	dir      string // the built-in proxy's runtime dir, removed by close
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

// close stops the built-in proxy and removes its runtime directory.
func (n *network) close() {
	if n.stop != nil {
		n.stop()
		n.wg.Wait()
	}
	if n.dir != "" {
		os.RemoveAll(n.dir)
	}
}

// setupNetwork decides the run's network. With no allow-list, no egress
// socket and no LLM socket the sandbox has no network at all and nothing is
// forwarded (the fast path).
func setupNetwork(ctx context.Context, p policy.Policy, uid, gid int, root bool, runID string, audit io.Writer, log *slog.Logger) (_ *network, err error) {
	n := &network{mode: "none", env: map[string]string{}}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	egress := p.EgressSocket
	switch {
	case egress != "":
		if err := checkSocket("--egress-socket", egress, uid, gid, root,
			"start the node's proxy (sandbox-run proxy --listen "+egress+") or fix the path"); err != nil {
			return nil, err
		}
		n.mode = "proxy (socket " + egress + ")"
	case len(p.AllowHosts) > 0:
		px, err := proxy.New(proxy.Config{Allow: p.AllowHosts, Audit: audit, Logger: log, RunID: runID})
		if err != nil {
			return nil, &SetupError{What: "--allow-host", Why: err.Error(), Fix: "write entries as host, host:port, host:*, *.domain, an IP or a CIDR"}
		}
		dir, err := os.MkdirTemp("", "sandbox-run-")
		if err != nil {
			return nil, setupErr("cannot create the proxy's runtime directory", err.Error(), "check that $TMPDIR is writable")
		}
		n.dir = dir
		egress = filepath.Join(dir, "egress.sock")
		ln, err := net.Listen("unix", egress)
		if err != nil {
			return nil, setupErr("cannot listen on "+egress, err.Error(), "check that $TMPDIR is writable")
		}
		// Only the sandbox's uid may reach the socket; the directory stays
		// 0700 (MkdirTemp), owned by that uid so that bwrap can bind it.
		if err := os.Chmod(egress, 0o600); err == nil && root {
			err = errors.Join(os.Chown(egress, uid, gid), os.Chown(dir, uid, gid))
			if err != nil {
				ln.Close()
				return nil, setupErr("cannot hand the proxy socket to uid "+strconv.Itoa(uid), err.Error(), "check $TMPDIR")
			}
		}
		pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		n.stop = cancel
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := px.Serve(pctx, ln); err != nil {
				log.Warn("egress proxy stopped", "err", err)
			}
		}()
		n.mode = "proxy (built-in)"
	}
	if egress != "" {
		n.binds = append(n.binds, [2]string{egress, egressInside})
		n.forwards = append(n.forwards, initproc.Forward{Port: egressPort, Socket: egressInside})
		setProxyEnv(n.env, "http://127.0.0.1:"+strconv.Itoa(egressPort))
	}
	if p.LLMSocket != "" {
		if err := checkSocket("--llm-socket", p.LLMSocket, uid, gid, root, "start the node's LLM proxy or fix the path"); err != nil {
			return nil, err
		}
		n.binds = append(n.binds, [2]string{p.LLMSocket, llmInside})
		n.forwards = append(n.forwards, initproc.Forward{Port: llmPort, Socket: llmInside})
		setLLMEnv(n.env, "http://127.0.0.1:"+strconv.Itoa(llmPort), p.LLMEnv)
		if n.mode == "none" {
			n.mode = "llm only"
		}
	}
	return n, nil
}

// checkSocket fails closed when a socket the run depends on is missing,
// not a socket, not reachable for the sandbox's uid, or refusing.
func checkSocket(flag, path string, uid, gid int, root bool, fix string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return setupErr(flag+" "+path, "does not exist ("+errText(err)+")", fix)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return setupErr(flag+" "+path, "is not a Unix socket", fix)
	}
	if err := accessibleAs(path, uid, gid, false, nil); err != nil {
		return err
	}
	if root && !socketWritableBy(fi, uid, gid) {
		return setupErr(flag+" "+path, fmt.Sprintf("uid %d, which the sandbox runs as, may not connect to it (connecting needs write permission)", uid),
			fmt.Sprintf("chown %d %s, or serve it with group access (sandbox-run proxy --mode 0660) to a group of uid %d", uid, path, uid))
	}
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return setupErr(flag+" "+path, "refuses connections ("+errText(err)+")", fix)
	}
	c.Close()
	return nil
}

func (n *network) String() string { return fmt.Sprintf("network %s", n.mode) }

func socketWritableBy(fi fs.FileInfo, uid, gid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	mode := uint32(fi.Mode().Perm())
	switch {
	case int(st.Uid) == uid:
		return mode&0o200 != 0
	case int(st.Gid) == gid:
		return mode&0o020 != 0
	}
	return mode&0o002 != 0
}
