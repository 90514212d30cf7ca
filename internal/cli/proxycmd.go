package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/sandbox-run/sandbox-run/policy"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/allowlist"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/proxy"
)

// proxyFlags are the flags of sandbox-run proxy.
type proxyFlags struct {
	fs                                        *pflag.FlagSet
	listen, config, audit, mode, owner, group string
	allow                                     []string
}

func newProxyFlags() *proxyFlags {
	f := &proxyFlags{fs: pflag.NewFlagSet("proxy", pflag.ContinueOnError)}
	fs := f.fs
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.listen, "listen", "", "Unix socket to serve on (required)")
	fs.StringArrayVar(&f.allow, "allow-host", nil, "allow-list entry (repeatable)")
	fs.StringVar(&f.config, "config", "", "profile whose allow_hosts is the allow-list; re-read on SIGHUP")
	fs.StringVar(&f.audit, "audit", "", "append every decision as a JSON line")
	fs.StringVar(&f.mode, "mode", "0600", "socket permissions: 0600 (its owner) or 0660 (its group too)")
	fs.StringVar(&f.owner, "owner", "", "give the socket to this user (name or uid; root only), e.g. the sandboxes' uid 65534")
	fs.StringVar(&f.group, "group", "", "give the socket to this group (name or gid), with --mode 0660 for its members")
	strict(fs, "listen", "config", "audit", "mode", "owner", "group")
	return f
}

// parse parses args and makes the host paths absolute. done says the
// invocation ends here with code (--help, or a refusal).
func (f *proxyFlags) parse(args []string, stdio IO) (code int, done bool) {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdio.Stdout, "usage: sandbox-run proxy --listen PATH [flags]\n%s", f.fs.FlagUsages())
			return 0, true
		}
		return fail(stdio.Stderr, fmt.Errorf("%v; fix: %s", err, parseFix(f.fs, args, "proxy"))), true
	}
	if f.listen == "" {
		return fail(stdio.Stderr, errors.New("proxy: --listen PATH is required; fix: sandbox-run proxy --listen /run/sandbox-run/egress.sock")), true
	}
	// Files the proxy opens on the host are named absolutely and opened
	// without following links (see hostfiles.go).
	for _, hp := range []struct {
		flag string
		path *string
	}{{"listen", &f.listen}, {"config", &f.config}, {"audit", &f.audit}} {
		var err error
		if *hp.path, err = hostPath(hp.flag, *hp.path); err != nil {
			return fail(stdio.Stderr, err), true
		}
	}
	return 0, false
}

// perm is the socket's mode from --mode.
func (f *proxyFlags) perm() (os.FileMode, error) {
	switch f.mode {
	case "0600":
		return 0o600, nil
	case "0660":
		return 0o660, nil
	}
	return 0, fmt.Errorf("proxy: --mode %q; fix: use 0600 or 0660", f.mode)
}

// entries is the allow-list: the --allow-host entries, then the profile's
// allow_hosts and its presets' hosts (re-read on every call).
func (f *proxyFlags) entries() ([]string, error) {
	list := append([]string(nil), f.allow...)
	if f.config != "" {
		p, err := readProfile("config", f.config)
		if err == nil {
			p, err = policy.ApplyPresets(p) // the profile's presets are hosts too
		}
		if err != nil {
			return nil, err
		}
		list = append(list, p.AllowHosts...)
	}
	return list, nil
}

// proxyCmd serves a node-wide egress proxy on a Unix socket until SIGTERM
// or SIGINT; SIGHUP reloads the allow-list from --config.
func proxyCmd(ctx context.Context, args []string, stdio IO, sigs <-chan os.Signal) int {
	f := newProxyFlags()
	if code, done := f.parse(args, stdio); done {
		return code
	}
	perm, err := f.perm()
	if err != nil {
		return fail(stdio.Stderr, err)
	}
	uid, gid, err := socketOwner(f.owner, f.group)
	if err != nil {
		return fail(stdio.Stderr, err)
	}
	list, err := f.entries()
	if err != nil {
		return fail(stdio.Stderr, fmt.Errorf("proxy: %w", err))
	}
	log := slog.New(slog.NewTextHandler(stdio.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// Its clients are sandboxes' relays, which name their run first.
	cfg := proxy.Config{Allow: list, Logger: log, RunIDFromPreamble: true}
	// The allow-list is checked before the audit file is opened, so that a
	// refused start leaves no file behind.
	if _, err := allowlist.Parse(list); err != nil {
		return fail(stdio.Stderr, fmt.Errorf("%w; fix: %s", err, allowListFix(list)))
	}
	var af *auditFile
	if f.audit != "" {
		if af, err = openAudit(f.audit); err != nil {
			return fail(stdio.Stderr, err)
		}
		defer af.Close()
		cfg.Audit = af
	}
	px, err := proxy.New(cfg)
	if err != nil {
		af.discard()
		return fail(stdio.Stderr, fmt.Errorf("%w; fix: %s", err, allowListFix(list)))
	}
	ln, err := listenUnix(f.listen, perm, uid, gid)
	if err != nil {
		af.discard()
		return fail(stdio.Stderr, err)
	}
	defer ln.Close() // removes the socket, through its pinned directory
	log.Info("egress proxy serving", "socket", f.listen, "entries", len(list))
	return f.serve(ctx, px, ln, log, stdio.Stderr, sigs)
}

// serve runs px on ln until it fails (exit 1) or a signal other than
// SIGHUP ends it (exit 0, after at most 10 s for it to stop); SIGHUP
// reloads the allow-list, keeping the old one when the new is refused.
func (f *proxyFlags) serve(ctx context.Context, px *proxy.Proxy, ln net.Listener, log *slog.Logger, stderr io.Writer, sigs <-chan os.Signal) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- px.Serve(ctx, ln) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintf(stderr, "sandbox-run: proxy: %v\n", err)
				return 1
			}
			return 0
		case s := <-sigs:
			if s == syscall.SIGHUP {
				f.reload(px, log)
				continue
			}
			log.Info("shutting down", "signal", s.String())
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
			}
			return 0
		}
	}
}

// reload re-reads the allow-list into px; on error the old one stays.
func (f *proxyFlags) reload(px *proxy.Proxy, log *slog.Logger) {
	list, err := f.entries()
	if err == nil {
		err = px.SetAllow(list)
	}
	if err != nil {
		log.Error("reload refused; the old allow-list stays", "err", err)
		return
	}
	log.Info("allow-list reloaded", "entries", len(list))
}

// listenUnix listens on path (absolute), replacing a stale socket nobody
// serves but never one that answers, nor anything that is not a socket,
// and following no link on the way (pathguard.ListenUnix).
func listenUnix(path string, perm os.FileMode, uid, gid int) (net.Listener, error) {
	ln, err := pathguard.ListenUnixAs(path, perm, uid, gid)
	switch {
	case errors.Is(err, pathguard.ErrInUse):
		return nil, fmt.Errorf("proxy: %s is already being served; fix: stop that proxy or choose another path", path)
	case errors.Is(err, pathguard.ErrNotRegular):
		return nil, fmt.Errorf("proxy: %s exists and is not a socket; fix: choose another --listen path", path)
	case errors.Is(err, fs.ErrPermission) && (uid >= 0 || gid >= 0):
		return nil, fmt.Errorf("proxy: %s: cannot give the socket to --owner/--group: %v; fix: run the proxy as root for --owner, or name a --group you are a member of", path, err)
	case err != nil:
		return nil, fmt.Errorf("proxy: listen %s: %v; fix: check the directory exists, is writable and is named by its real path (no symbolic link on the way)", path, err)
	}
	return ln, nil
}

// socketOwner resolves --owner and --group (names or numeric ids) to ids;
// -1 leaves the socket's as they are.
func socketOwner(owner, group string) (int, int, error) {
	uid, gid := -1, -1
	if owner != "" {
		id, err := lookupID(owner, func(s string) (string, error) {
			u, err := user.Lookup(s)
			if err != nil {
				return "", err
			}
			return u.Uid, nil
		})
		if err != nil {
			return 0, 0, fmt.Errorf("proxy: --owner %q: %v; fix: name an existing user or a numeric uid, e.g. --owner 65534", owner, err)
		}
		if id != os.Geteuid() && os.Geteuid() != 0 {
			return 0, 0, fmt.Errorf("proxy: --owner %q: only root may give the socket to another user; fix: run the proxy as root, or use --group with --mode 0660", owner)
		}
		uid = id
	}
	if group != "" {
		id, err := lookupID(group, func(s string) (string, error) {
			g, err := user.LookupGroup(s)
			if err != nil {
				return "", err
			}
			return g.Gid, nil
		})
		if err != nil {
			return 0, 0, fmt.Errorf("proxy: --group %q: %v; fix: name an existing group or a numeric gid", group, err)
		}
		gid = id
	}
	return uid, gid, nil
}

// lookupID takes a numeric id as it is and looks a name up.
func lookupID(s string, lookup func(string) (string, error)) (int, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || int64(n) > maxID {
			return 0, fmt.Errorf("id out of range")
		}
		return n, nil
	}
	v, err := lookup(s)
	if err != nil {
		return 0, errors.New("no such name")
	}
	return strconv.Atoi(v)
}
