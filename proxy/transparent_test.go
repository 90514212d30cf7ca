package proxy

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	res := newResolver(map[string][]string{
		"public.test":   {"93.184.216.34"},
		"rebind.test":   {"93.184.216.34", "127.0.0.1"},
		"internal.test": {"10.0.0.7"},
		"named.test":    {"10.0.0.8"},
		"meta.test":     {"169.254.169.254"},
		"own.test":      {"192.0.2.77"},
		"sub.wild.test": {"93.184.216.35"},
	})
	allow := []string{"public.test", "rebind.test", "internal.test", "named.test:5432", "10.0.0.8", "meta.test:*", "own.test", "*.wild.test:22"}
	var audit bytes.Buffer
	p, err := New(Config{Allow: allow, Resolver: res, Audit: &audit})
	if err != nil {
		t.Fatal(err)
	}
	p.ownAddrs = func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("192.0.2.77")}, nil }
	for _, c := range []struct {
		name   string
		want   string // the first answer, or the refusal reason
		refuse bool
	}{
		{"public.test", "93.184.216.34", false},
		{"PUBLIC.test.", "93.184.216.34", false},
		{"sub.wild.test", "93.184.216.35", false},
		{"named.test", "10.0.0.8", false}, // an address entry names the private answer
		{"unlisted.test", reasonNotAllowed, true},
		{"wild.test", reasonNotAllowed, true}, // *.domain is subdomains only
		{"rebind.test", reasonLoopback, true},
		{"internal.test", reasonPrivate, true},
		{"meta.test", reasonMetadata, true},
		{"own.test", reasonOwnAddr, true},
		{"10.0.0.8", reasonBadHost, true},
	} {
		ips, err := p.Lookup(context.Background(), c.name, false)
		var r *Refused
		switch {
		case c.refuse && !errors.As(err, &r):
			t.Errorf("%s: %v %v, want a refusal %s", c.name, ips, err, c.want)
		case c.refuse && r.Reason != c.want:
			t.Errorf("%s: refused %s, want %s", c.name, r.Reason, c.want)
		case c.refuse && r.Fix == "":
			t.Errorf("%s: a refusal that does not say what would allow it", c.name)
		case !c.refuse && (err != nil || len(ips) == 0 || ips[0].String() != c.want):
			t.Errorf("%s: %v %v, want %s", c.name, ips, err, c.want)
		}
	}
	for _, want := range []string{`"event":"dns"`, `"host":"unlisted.test","port":0,"ip":"","decision":"refuse","reason":"not-allowed"`, `"decision":"allow"`} {
		if !strings.Contains(audit.String(), want) {
			t.Errorf("audit lacks %s:\n%s", want, audit.String())
		}
	}
}

func TestDecideAddr(t *testing.T) {
	p, err := New(Config{Allow: []string{"git.test:22", "web.test", "10.1.2.3:5432", "93.184.216.40:7000"}})
	if err != nil {
		t.Fatal(err)
	}
	p.ownAddrs = func() ([]netip.Addr, error) { return nil, nil }
	ap := netip.MustParseAddrPort
	for _, c := range []struct {
		name    string
		dst     string
		reason  string // "" for allowed
		host    string // the audited host
		fixHint string
	}{
		{"git.test", "93.184.216.34:22", "", "git.test", ""},
		{"", "93.184.216.34:22", reasonNotAllowed, "93.184.216.34", "93.184.216.34:22"},
		{"git.test", "93.184.216.34:2222", reasonNotAllowed, "git.test", "--allow-host git.test:2222"},
		{"web.test", "93.184.216.34:443", "", "web.test", ""},
		{"web.test", "127.0.0.1:443", reasonLoopback, "web.test", ""},
		{"web.test", "169.254.169.254:80", reasonMetadata, "web.test", ""},
		{"web.test", "10.1.2.3:443", reasonPrivate, "web.test", "--allow-host 10.1.2.3 next to the entry for web.test"},
		{"", "10.1.2.3:5432", "", "10.1.2.3", ""},
		{"other.test", "93.184.216.40:7000", "", "93.184.216.40", ""}, // an IP entry admits what the name does not
		{"", "[::1]:22", reasonLoopback, "::1", ""},
	} {
		d := p.decideAddr(c.name, ap(c.dst))
		got := ""
		if d.refusal != nil {
			got = d.refusal.reason
		}
		if got != c.reason {
			t.Errorf("%s %s: %q, want %q", c.name, c.dst, got, c.reason)
			continue
		}
		if d.t.Host() != c.host {
			t.Errorf("%s %s: judged as %s, want %s", c.name, c.dst, d.t.Host(), c.host)
		}
		if c.fixHint != "" && !strings.Contains(d.refusal.fix, c.fixHint) {
			t.Errorf("%s %s: fix %q lacks %q", c.name, c.dst, d.refusal.fix, c.fixHint)
		}
		if d.refusal == nil && (len(d.ips) != 1 || d.ips[0] != ap(c.dst).Addr()) {
			t.Errorf("%s %s: may dial %v, want exactly the address", c.name, c.dst, d.ips)
		}
	}
}

// TestTransparentTerminatedRefused: a host the proxy terminates (an
// --allow-http rule names it) is refused to a transparent connection,
// which would carry requests past the rules, with the reason and the way
// through the proxy named. Control: the same host allowed by --allow-host
// alone is dialled (refused only by the dial, not by the judge).
func TestTransparentTerminatedRefused(t *testing.T) {
	dst := netip.MustParseAddrPort("93.184.216.34:443")
	for _, c := range []struct {
		cfg    Config
		reason string
	}{
		{Config{HTTPRules: []string{"GET api.test/repos/**"}}, reasonTerminatedDirect},
		{Config{Allow: []string{"api.test"}}, ""},
	} {
		p, err := New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		p.ownAddrs = func() ([]netip.Addr, error) { return nil, nil }
		ctx, cancel := context.WithCancel(context.Background())
		tr := p.Transparent(ctx)
		// The control's dial goes nowhere: an address of TEST-NET that the
		// dialer is stopped from reaching by an already cancelled context.
		dctx, dcancel := context.WithCancel(ctx)
		dcancel()
		conn, err := tr.Dial(dctx, "api.test", dst)
		cancel()
		if conn != nil {
			conn.Close()
		}
		var r *Refused
		switch {
		case c.reason != "" && (!errors.As(err, &r) || r.Reason != c.reason || !strings.Contains(r.Fix, "proxy")):
			t.Errorf("%v: %v, want a %s refusal that names the proxy", c.cfg, err, c.reason)
		case c.reason == "" && errors.As(err, &r):
			t.Errorf("control %v: refused %s by the judge, want it dialled", c.cfg, r.Reason)
		}
	}
}
