package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/sandbox-run/sandbox-run/allowlist"
)

// feature is a sandbox-run capability that a settings key needs. A nil
// apply means this build lacks it, and the key is refused with missing as
// the reason; giving apply (a function that adds the key's entries to the
// policy) is all it takes to turn the key to "applied".
type feature struct {
	missing string
	fix     string
	// paths says the entries are paths: apply gets them resolved (~,
	// relative to the workdir) and absolute.
	paths bool
	apply func(p *Policy, entries []string)
	// refuse, when set, names why an entry weakens the sandbox ("" when
	// it does not): such an entry refuses the key.
	refuse func(entry string) (why, fix string)
}

// features are the capabilities settings keys need beyond what Policy
// holds today.
var features = map[string]feature{
	"unix-socket": {paths: true, apply: func(p *Policy, entries []string) {
		for _, e := range entries {
			p.UnixSockets = appendNew(p.UnixSockets, e)
		}
	}, refuse: func(e string) (string, string) {
		// As --unix-socket: the run also refuses a socket whose listener
		// is a root daemon, whatever its name.
		if why := RootSocket(e); why != "" {
			return e + " " + why + ", which grants host root", "remove it; to hand it in knowingly, pass --unix-socket-unsafe " + e
		}
		return "", ""
	}},
	"secret": {missing: "credential rules need --secret, which this build lacks (the command gets no variable and no home file unless named)",
		fix: "remove the block; pass what the command needs with --pass-env"},
	"tls": {missing: "TLS termination needs per-host TLS rules, which this build lacks",
		fix: "remove the block"},
}

// needs is a key whose non-empty list or true value needs feature name.
func needs(name string) handler {
	return func(s *settingsRun, key string, raw json.RawMessage) error {
		f := features[name]
		var entries []string
		var on bool
		var err error
		if strictDecode(raw, &on) != nil {
			if entries, err = stringList(key, raw); err != nil {
				// An object (credentials, tlsTerminate): on when not empty.
				var m map[string]json.RawMessage
				if strictDecode(raw, &m) != nil {
					return err
				}
				on = len(m) > 0
			}
			on = on || len(entries) > 0
		}
		switch {
		case !on:
			s.note(key, StatusHeld, "empty or false: nothing asked")
		case f.apply == nil:
			return &SettingsError{Key: key, Reason: f.missing, Fix: f.fix, Missing: name}
		default:
			for i, e := range entries {
				if !f.paths {
					break
				}
				if entries[i], err = resolveSrt(s.base, e); err != nil {
					return &SettingsError{Key: fmt.Sprintf("%s[%d]", key, i), Reason: fmt.Sprintf("%q: %v", e, err), Fix: "write an absolute path or ~/path"}
				}
			}
			for i, e := range entries {
				if f.refuse == nil {
					break
				}
				if why, fix := f.refuse(e); why != "" {
					return &SettingsError{Key: fmt.Sprintf("%s[%d]", key, i), Reason: why, Fix: fix}
				}
			}
			f.apply(&s.p, entries)
			s.note(key, StatusApplied, "%s", strings.Join(entries, ", "))
		}
		return nil
	}
}

// unsupported is a key sandbox-run refuses whatever its value, for why.
func unsupported(why, fix string) handler {
	return func(s *settingsRun, key string, raw json.RawMessage) error {
		return &SettingsError{Key: key, Reason: why, Fix: fix}
	}
}

// hostList collects allowed (deny false) or denied hosts.
func hostList(deny bool) handler {
	return func(s *settingsRun, key string, raw json.RawMessage) error {
		v, err := stringList(key, raw)
		if err != nil {
			return err
		}
		for i, h := range v {
			e := hostEntry{key: fmt.Sprintf("%s[%d]", key, i), host: h}
			if deny {
				s.denyHosts = append(s.denyHosts, e)
			} else {
				s.allowHosts = append(s.allowHosts, e)
			}
		}
		if len(v) == 0 {
			s.note(key, StatusHeld, "empty")
		}
		return nil
	}
}

// pathList collects one of the four path lists; resolve spells the
// tool's path rules.
func pathList(dst func(*settingsRun) *[]pathEntry, resolve func(SettingsBase, string) (string, error)) handler {
	return func(s *settingsRun, key string, raw json.RawMessage) error {
		v, err := stringList(key, raw)
		if err != nil {
			return err
		}
		for i, e := range v {
			k := fmt.Sprintf("%s[%d]", key, i)
			p, err := resolve(s.base, e)
			if err != nil {
				s.refuse(&SettingsError{Key: k, Reason: fmt.Sprintf("%q: %v", e, err), Fix: pathFix(err, "write an absolute path, ~/path or a path relative to the workdir")})
				continue
			}
			*dst(s) = append(*dst(s), pathEntry{key: k, spelled: e, path: p})
		}
		if len(v) == 0 {
			s.note(key, StatusHeld, "empty")
		}
		return nil
	}
}

// resolveSrt spells srt's rules: "~" and "~/" are the home, a relative
// path is relative to the command's directory. A trailing "/**" is the
// directory (as srt reads it on Linux); any other glob is refused, since
// sandbox-run binds directories, not patterns.
func resolveSrt(b SettingsBase, p string) (string, error) {
	switch {
	case p == "~":
		p = b.Home
	case strings.HasPrefix(p, "~/"):
		if b.Home == "" {
			return "", fmt.Errorf("the home directory is not known")
		}
		p = b.Home + p[1:]
	case strings.HasPrefix(p, "~"):
		return "", fmt.Errorf("~user is not expanded")
	case !filepath.IsAbs(p):
		p = filepath.Join(b.Workdir, p)
	}
	return literal(p)
}

// errGlob is a path with a glob pattern sandbox-run cannot hold.
var errGlob = errors.New("a glob pattern: sandbox-run mounts and protects whole paths, not patterns")

// pathFix is the fix for a path resolve refused.
func pathFix(err error, spelling string) string {
	if errors.Is(err, errGlob) {
		return "list the paths themselves, or remove the entry"
	}
	return spelling
}

// literal cleans p, drops a trailing "/**" and refuses other globs and
// "..".
func literal(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("the home directory is not known")
	}
	p = strings.TrimSuffix(p, "/**")
	if strings.ContainsAny(p, "*?[") {
		return "", errGlob
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", fmt.Errorf("a '..' component")
		}
	}
	return filepath.Clean(p), nil
}

// finish judges the collected hosts and paths.
func (s *settingsRun) finish() {
	s.finishHosts()
	s.finishWrite()
	s.finishRead()
}

// hostPort hands in a service on the host's loopback that an allowed
// "localhost:PORT" names, as --host-port PORT does; the egress proxy never
// reaches loopback, and a name without a port names no one service.
func (s *settingsRun) hostPort(key, host string) {
	_, port := splitHostPort(host)
	if port == "" || port == "*" {
		s.refuse(&SettingsError{Key: key, Reason: fmt.Sprintf("%q: the host's loopback is reached one service at a time, by port", host),
			Fix: "write localhost:PORT, or pass --host-port PORT"})
		return
	}
	s.p.HostPorts = appendNew(s.p.HostPorts, port)
	s.note(key, StatusApplied, "%q: the host's 127.0.0.1:%s reachable inside at the same address (--host-port %s)", host, port, port)
}

func (s *settingsRun) finishHosts() {
	for _, a := range s.allowHosts {
		if isLoopbackName(a.host) {
			s.hostPort(a.key, a.host)
			continue
		}
		if _, err := allowlist.Parse([]string{a.host}); err != nil {
			s.refuse(&SettingsError{Key: a.key, Reason: entryDetail(err), Fix: allowHostFix})
			continue
		}
		if d, ok := s.deniedBy(a.host); ok {
			s.note(a.key, StatusHeld, "%q left out: %s denies it", a.host, d.key)
			continue
		}
		s.p.AllowHosts = appendNew(s.p.AllowHosts, a.host)
		detail := fmt.Sprintf("%q allowed", a.host)
		if _, port := splitHostPort(a.host); port == "" {
			detail += " on ports 80 and 443 (srt: any port; write host:* for every port)"
		}
		s.note(a.key, StatusApplied, "%s", detail)
	}
	for _, d := range s.denyHosts {
		s.finishDenied(d)
	}
}

// finishDenied holds a denied host: sandbox-run refuses every host its
// allow-list does not name, so a deny entry is held unless an allowed
// wildcard still covers it (an exception sandbox-run cannot express).
func (s *settingsRun) finishDenied(d hostEntry) {
	dh, dp := splitHostPort(d.host)
	base := strings.ToLower(strings.TrimPrefix(dh, "*."))
	for _, a := range s.allowHosts {
		ah, ap := splitHostPort(a.host)
		if dp != "" && dp != ap && (ap != "" || (dp != "80" && dp != "443")) {
			continue // the allowed entry never reaches the denied port
		}
		if dh != "*" && strings.HasPrefix(ah, "*.") && strings.HasSuffix(base, strings.ToLower(ah[1:])) {
			s.refuse(&SettingsError{Key: d.key, Reason: fmt.Sprintf("%q lies under the allowed %q (%s): sandbox-run's allow-list has no exceptions", d.host, a.host, a.key),
				Fix: "list the allowed subdomains one by one instead of " + a.host})
			return
		}
	}
	s.note(d.key, StatusHeld, "%q is refused: sandbox-run refuses every host its allow-list does not name", d.host)
}

// deniedBy says which denied entry covers the allowed host h whole (the
// denied entry wins in srt).
func (s *settingsRun) deniedBy(h string) (hostEntry, bool) {
	ah, ap := splitHostPort(h)
	for _, d := range s.denyHosts {
		dh, dp := splitHostPort(d.host)
		if dp != "" && dp != ap {
			continue
		}
		l, dl := strings.ToLower(ah), strings.ToLower(dh)
		if dl == "*" || l == dl || (strings.HasPrefix(dl, "*.") && strings.HasSuffix(l, dl[1:])) {
			return d, true
		}
	}
	return hostEntry{}, false
}

func splitHostPort(h string) (host, port string) {
	if strings.HasPrefix(h, "[") {
		if i := strings.Index(h, "]"); i > 0 {
			return h[1:i], strings.TrimPrefix(h[i+1:], ":")
		}
	}
	if i := strings.LastIndex(h, ":"); i >= 0 && strings.Count(h, ":") == 1 {
		return h[:i], h[i+1:]
	}
	return h, ""
}

func isLoopbackName(h string) bool {
	host, _ := splitHostPort(h)
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

func appendNew(list []string, v string) []string {
	for _, e := range list {
		if e == v {
			return list
		}
	}
	return append(list, v)
}

// deniedAddresses holds addresses an allowed host must not resolve to:
// sandbox-run never reaches loopback, link-local and metadata addresses,
// and reaches a private one only when an address entry names it. A public
// address, or a private one an address entry reopens, is refused: there is
// no per-address deny list.
func deniedAddresses() handler {
	return func(s *settingsRun, key string, raw json.RawMessage) error {
		v, err := stringList(key, raw)
		if err != nil {
			return err
		}
		for i, e := range v {
			k := fmt.Sprintf("%s[%d]", key, i)
			pfx, err := netip.ParsePrefix(e)
			if err != nil {
				a, aerr := netip.ParseAddr(e)
				if aerr != nil {
					return &SettingsError{Key: k, Reason: fmt.Sprintf("%q is not an address or CIDR", e), Fix: "write e.g. 10.0.0.0/8"}
				}
				pfx = netip.PrefixFrom(a, a.BitLen())
			}
			a := pfx.Masked().Addr()
			refused := a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified() || a.IsMulticast()
			if !refused && !(a.IsPrivate() && !s.namesAddress()) {
				return &SettingsError{Key: k, Reason: fmt.Sprintf("%q: sandbox-run has no per-address deny list beyond its refused ranges", e),
					Fix: "remove the entry, or allow hosts by name only (no address entries)"}
			}
			s.note(k, StatusHeld, "%q: a refused range (loopback, link-local, private unless an address entry names it)", e)
		}
		return nil
	}
}

// namesAddress reports whether an allowed entry is an address or CIDR.
func (s *settingsRun) namesAddress() bool {
	for _, h := range append(append([]string(nil), s.p.AllowHosts...), hostsOf(s.allowHosts)...) {
		host, _ := splitHostPort(h)
		if _, err := netip.ParseAddr(host); err == nil {
			return true
		}
		if _, err := netip.ParsePrefix(host); err == nil {
			return true
		}
	}
	return false
}

func hostsOf(es []hostEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.host)
	}
	return out
}

// localBinding reads allowLocalBinding. The command may always listen on
// its own loopback (its network namespace is its own); what the key asks
// beyond that, a port the host can reach, is --publish PORT, which names
// ports a settings file does not.
func localBinding(s *settingsRun, key string, raw json.RawMessage) error {
	var on bool
	if err := strictDecode(raw, &on); err != nil {
		return &SettingsError{Key: key, Reason: "not true or false", Fix: "write true or false"}
	}
	if !on {
		s.note(key, StatusHeld, "false: nothing asked")
		return nil
	}
	s.note(key, StatusHeld, "the command may listen on its own loopback; the host reaches a port of it only with --publish PORT")
	return nil
}
