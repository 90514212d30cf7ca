package cli

import (
	"context"
	"errors"
	"fmt"
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

// proxyCmd serves a node-wide egress proxy on a Unix socket until SIGTERM
// or SIGINT; SIGHUP reloads the allow-list from --config.
func proxyCmd(ctx context.Context, args []string, stdio IO, sigs <-chan os.Signal) int {
	fs := pflag.NewFlagSet("proxy", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listen := fs.String("listen", "", "Unix socket to serve on (required)")
	allow := fs.StringArray("allow-host", nil, "allow-list entry (repeatable)")
	config := fs.String("config", "", "profile whose allow_hosts is the allow-list; re-read on SIGHUP")
	audit := fs.String("audit", "", "append every decision as a JSON line")
	mode := fs.String("mode", "0600", "socket permissions: 0600 (its owner) or 0660 (its group too)")
	owner := fs.String("owner", "", "give the socket to this user (name or uid; root only), e.g. the sandboxes' uid 65534")
	group := fs.String("group", "", "give the socket to this group (name or gid), with --mode 0660 for its members")
	strict(fs, "listen", "config", "audit", "mode", "owner", "group")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdio.Stdout, "usage: sandbox-run proxy --listen PATH [flags]\n%s", fs.FlagUsages())
			return 0
		}
		return fail(stdio.Stderr, fmt.Errorf("%v; fix: see sandbox-run proxy --help", err))
	}
	if *listen == "" {
		return fail(stdio.Stderr, errors.New("proxy: --listen PATH is required; fix: sandbox-run proxy --listen /run/sandbox-run/egress.sock"))
	}
	// Files the proxy opens on the host are named absolutely and opened
	// without following links (see hostfiles.go).
	for _, hp := range []struct {
		flag string
		path *string
	}{{"listen", listen}, {"config", config}, {"audit", audit}} {
		var err error
		if *hp.path, err = hostPath(hp.flag, *hp.path); err != nil {
			return fail(stdio.Stderr, err)
		}
	}
	perm := os.FileMode(0o600)
	switch *mode {
	case "0600":
	case "0660":
		perm = 0o660
	default:
		return fail(stdio.Stderr, fmt.Errorf("proxy: --mode %q; fix: use 0600 or 0660", *mode))
	}
	uid, gid, err := socketOwner(*owner, *group)
	if err != nil {
		return fail(stdio.Stderr, err)
	}
	entries := func() ([]string, error) {
		list := append([]string(nil), (*allow)...)
		if *config != "" {
			p, err := readProfile("config", *config)
			if err != nil {
				return nil, err
			}
			list = append(list, p.AllowHosts...)
		}
		return list, nil
	}
	list, err := entries()
	if err != nil {
		return fail(stdio.Stderr, fmt.Errorf("proxy: %w", err))
	}
	log := slog.New(slog.NewTextHandler(stdio.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// Its clients are sandboxes' relays, which name their run first.
	cfg := proxy.Config{Allow: list, Logger: log, RunIDFromPreamble: true}
	// The allow-list is checked before the audit file is opened, so that a
	// refused start leaves no file behind.
	if _, err := allowlist.Parse(list); err != nil {
		return fail(stdio.Stderr, fmt.Errorf("%w; fix: correct the allow-list", err))
	}
	var af *auditFile
	if *audit != "" {
		if af, err = openAudit(*audit); err != nil {
			return fail(stdio.Stderr, err)
		}
		defer af.Close()
		cfg.Audit = af
	}
	px, err := proxy.New(cfg)
	if err != nil {
		af.discard()
		return fail(stdio.Stderr, fmt.Errorf("%w; fix: correct the allow-list", err))
	}
	ln, err := listenUnix(*listen, perm, uid, gid)
	if err != nil {
		af.discard()
		return fail(stdio.Stderr, err)
	}
	defer ln.Close() // removes the socket, through its pinned directory
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- px.Serve(ctx, ln) }()
	log.Info("egress proxy serving", "socket", *listen, "entries", len(list))
	for {
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "sandbox-run: proxy: %v\n", err)
				return 1
			}
			return 0
		case s := <-sigs:
			if s == syscall.SIGHUP {
				list, err := entries()
				if err == nil {
					err = px.SetAllow(list)
				}
				if err != nil {
					log.Error("reload refused; the old allow-list stays", "err", err)
				} else {
					log.Info("allow-list reloaded", "entries", len(list))
				}
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
