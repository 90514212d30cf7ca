package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/mcp"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// The bounds of --max-sessions and --session-idle.
const (
	maxMaxSessions = 1024
	minSessionIdle = time.Second
	maxSessionIdle = 7 * 24 * time.Hour
)

// httpFlags are the flags of `sandbox-run mcp --listen`.
type httpFlags struct {
	listen       string
	remote       bool
	tokenFile    string
	origins      []string
	maxSessions  int
	sessionIdle  time.Duration
	sessionIdleS string
}

func addHTTPFlags(fs *pflag.FlagSet) *httpFlags {
	h := &httpFlags{}
	fs.StringVar(&h.listen, "listen", "", "serve MCP's Streamable HTTP transport on this HOST:PORT (at "+mcp.HTTPPath+"), one sandboxed server per client session, instead of stdio; loopback only unless --listen-remote")
	fs.BoolVar(&h.remote, "listen-remote", false, "let --listen take a non-loopback address (no TLS: the token and messages cross the network in clear)")
	fs.StringVar(&h.tokenFile, "token-file", "", "read the bearer token clients must send from this file (one line, at least 16 visible ASCII bytes, not readable by group or others); default: a random one, printed once on stderr")
	fs.StringArrayVar(&h.origins, "allow-origin", nil, "a browser origin (scheme://host[:port]) allowed to call --listen (repeatable); requests with any other Origin header get 403")
	fs.IntVar(&h.maxSessions, "max-sessions", mcp.DefaultMaxSessions, "client sessions (each with its own sandboxed server) at once with --listen; at the cap a new session ends the least recently used one with nothing in flight (audited), or gets 503 when all are busy")
	fs.StringVar(&h.sessionIdleS, "session-idle", mcp.DefaultSessionIdle.String(), "end a --listen session left without a request or stream this long")
	return h
}

// given says whether any HTTP flag was used, and names one.
func (h *httpFlags) given(fs *pflag.FlagSet) string {
	for _, n := range []string{"listen-remote", "token-file", "allow-origin", "max-sessions", "session-idle"} {
		if fs.Changed(n) {
			return n
		}
	}
	return ""
}

// check refuses HTTP flags that make no sense, before anything runs.
func (h *httpFlags) check(fs *pflag.FlagSet, mf *mcpFlags, report string) error {
	if h.listen == "" {
		if n := h.given(fs); n != "" {
			return fmt.Errorf("--%s without --listen; fix: add --listen 127.0.0.1:PORT, or leave --%s out", n, n)
		}
		return nil
	}
	if mf.pin != "" || mf.pinUpdate {
		return errors.New("--pin with --listen: a pin recorded by a first session is per stdio session; fix: use --pin-from FILE (a reviewed pin: sandbox-run pin save), or serve on stdio")
	}
	if report != "" {
		return errors.New("--report with --listen: every session has a sandbox of its own; fix: use --audit, where each session's sandbox records its run_start and run_end")
	}
	if h.maxSessions < 1 || h.maxSessions > maxMaxSessions {
		return fmt.Errorf("--max-sessions %d: want a number from 1 to %d; fix: leave it out for %d", h.maxSessions, maxMaxSessions, mcp.DefaultMaxSessions)
	}
	d, err := time.ParseDuration(h.sessionIdleS)
	if err != nil || d < minSessionIdle || d > maxSessionIdle {
		return fmt.Errorf("--session-idle %q: want a duration from %s to %s (e.g. 10m); fix: leave it out for %s", h.sessionIdleS, minSessionIdle, maxSessionIdle, mcp.DefaultSessionIdle)
	}
	h.sessionIdle = d
	for _, o := range h.origins {
		if err := checkOrigin(o); err != nil {
			return err
		}
	}
	return h.checkAddr()
}

// checkAddr refuses a --listen that is not HOST:PORT with an IP or
// localhost, and a non-loopback one without --listen-remote.
func (h *httpFlags) checkAddr() error {
	host, port, err := net.SplitHostPort(h.listen)
	if err != nil || port == "" {
		return fmt.Errorf("--listen %q: want HOST:PORT (e.g. 127.0.0.1:8765); fix: name an address and a port (0 picks one)", h.listen)
	}
	ip := net.ParseIP(host)
	switch {
	case host == "localhost":
		h.listen = net.JoinHostPort("127.0.0.1", port)
		return nil
	case ip == nil:
		return fmt.Errorf("--listen %q: %q is not an IP address; fix: name the address to listen on by its IP (127.0.0.1 for this machine only)", h.listen, host)
	case ip.IsLoopback():
		return nil
	case !h.remote:
		return fmt.Errorf("--listen %s: not a loopback address, so clients on the network could reach the server; fix: listen on 127.0.0.1, or add --listen-remote (no TLS: put a TLS proxy in front)", h.listen)
	}
	return nil
}

// checkOrigin refuses an --allow-origin that a browser never sends.
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil || o == "null" {
		return fmt.Errorf("--allow-origin %q: not an origin; fix: write it as a browser sends it, scheme://host[:port] (e.g. http://localhost:6274)", o)
	}
	return nil
}

// token reads the --token-file (a host file: refused in or through a
// writable directory, opened without following links, not readable by
// group or others), or makes one.
func (h *httpFlags) token(p policy.Policy) (tok string, generated bool, err error) {
	if h.tokenFile == "" {
		return mcp.NewToken(), true, nil
	}
	if h.tokenFile, err = hostPath("token-file", h.tokenFile); err != nil {
		return "", false, err
	}
	if err := checkHostFiles(p, hostFile{"token-file", h.tokenFile}); err != nil {
		return "", false, err
	}
	fh, err := pathguard.OpenFile(h.tokenFile, os.O_RDONLY, 0)
	if err != nil {
		return "", false, fmt.Errorf("--token-file %s: %v; fix: name a readable regular file by its real path", h.tokenFile, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return "", false, fmt.Errorf("--token-file %s: not a regular file; fix: name a file holding the token", h.tokenFile)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", false, fmt.Errorf("--token-file %s: mode %04o lets other users read the token; fix: chmod 600 %s", h.tokenFile, fi.Mode().Perm(), h.tokenFile)
	}
	b, err := io.ReadAll(io.LimitReader(fh, 4<<10))
	if err != nil {
		return "", false, fmt.Errorf("--token-file %s: %v; fix: name a readable file", h.tokenFile, err)
	}
	tok = strings.TrimSpace(string(b))
	if err := mcp.CheckToken(tok); err != nil {
		return "", false, fmt.Errorf("--token-file %s: %v; fix: write one line of at least %d visible ASCII bytes, e.g. openssl rand -hex 32 > %s", h.tokenFile, err, mcp.MinTokenBytes, h.tokenFile)
	}
	return tok, false, nil
}

// serveHTTP is `sandbox-run mcp --listen`: it serves until a SIGINT or
// SIGTERM (or ctx) ends it, then ends every session's sandbox. served
// says whether it got as far as listening.
func (h *httpFlags) serveHTTP(ctx context.Context, p policy.Policy, cmd []string, opts mcp.Options, stdio IO, sigs <-chan os.Signal) (code int, served bool) {
	tok, generated, err := h.token(p)
	if err != nil {
		return fail(stdio.Stderr, err), false
	}
	ln, err := net.Listen("tcp", h.listen)
	if err != nil {
		return fail(stdio.Stderr, fmt.Errorf("--listen %s: %v; fix: pick a free port (0 picks one)", h.listen, err)), false
	}
	// Each session's sandbox would take signals from one shared channel:
	// they end the listener instead, which ends every sandbox.
	opts.Sandbox.Signals = nil
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for s := range sigs {
			if s == syscall.SIGINT || s == syscall.SIGTERM || s == syscall.SIGHUP {
				cancel()
				return
			}
		}
	}()
	fmt.Fprintf(stdio.Stderr, "sandbox-run: mcp: serving MCP over HTTP at http://%s%s\n", ln.Addr(), mcp.HTTPPath)
	if !ln.Addr().(*net.TCPAddr).IP.IsLoopback() {
		fmt.Fprintf(stdio.Stderr, "sandbox-run: mcp: %s is not a loopback address (--listen-remote): without TLS the token and every message cross the network in clear; put a TLS proxy in front\n", ln.Addr())
	}
	if generated {
		fmt.Fprintf(stdio.Stderr, "sandbox-run: mcp: bearer token (printed once; clients send Authorization: Bearer TOKEN): %s\n", tok)
	}
	err = mcp.ServeHTTP(ctx, ln, p, cmd, mcp.HTTPOptions{
		Relay: opts, Token: tok, AllowOrigins: h.origins, AllowRemote: h.remote,
		MaxSessions: h.maxSessions, SessionIdle: h.sessionIdle, Logger: opts.Logger,
	})
	if err != nil {
		return fail(stdio.Stderr, err), true
	}
	return 0, true
}
