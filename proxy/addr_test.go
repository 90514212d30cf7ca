package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeResolver answers from a table; a name with several answer sets gets
// them in turn, one per lookup (the last one repeats).
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

func newResolver(tbl map[string][]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]netip.Addr{}, calls: map[string]int{}}
	for name, ips := range tbl {
		var set []netip.Addr
		for _, s := range ips {
			if s == "|" { // separates successive answer sets
				r.answers[name] = append(r.answers[name], set)
				set = nil
				continue
			}
			set = append(set, netip.MustParseAddr(s))
		}
		r.answers[name] = append(r.answers[name], set)
	}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sets, ok := r.answers[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	i := min(r.calls[host], len(sets)-1)
	r.calls[host]++
	return sets[i], nil
}

func TestDecide(t *testing.T) {
	res := newResolver(map[string][]string{
		"public.test":   {"93.184.216.34"},
		"evil.test":     {"127.0.0.1"},
		"meta.test":     {"169.254.169.254"},
		"mapped.test":   {"::ffff:127.0.0.1"},
		"mixed.test":    {"93.184.216.34", "127.0.0.1"}, // one good, one refused answer
		"rebind.test":   {"93.184.216.34", "|", "127.0.0.1"},
		"internal.test": {"10.1.2.3"},
		"intern2.test":  {"10.7.7.7"},
		"ula.test":      {"fd00::5"},
	})
	p, err := New(Config{
		Allow: []string{"public.test", "evil.test", "meta.test", "mapped.test", "mixed.test", "rebind.test",
			"internal.test", "intern2.test", "10.1.2.3", "ula.test", "*.wild.test", "93.184.216.34:8080"},
		Resolver: res,
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		target string
		reason string // "" = allowed
		fix    string // a refusal must say this in its fix
	}{
		{"public.test:443", "", ""},
		{"public.test:8443", reasonNotAllowed, "--allow-host public.test:8443"},
		{"other.test:443", reasonNotAllowed, "--allow-host other.test"},
		{"evil.test:443", reasonLoopback, "not possible"},
		{"meta.test:80", reasonMetadata, "not possible"},
		{"mapped.test:80", reasonLoopback, ""},
		{"mixed.test:443", reasonLoopback, ""},
		{"rebind.test:443", "", ""},             // first answer: public
		{"rebind.test:443", reasonLoopback, ""}, // second answer: loopback, decided anew
		{"internal.test:443", "", ""},           // names 10.1.2.3 explicitly
		{"intern2.test:443", reasonPrivate, "--allow-host 10.7.7.7 next to the entry for intern2.test"},
		{"ula.test:443", reasonPrivate, "--allow-host fd00::5"},
		{"nx.wild.test:443", reasonDNS, ""},
		{"10.1.2.3:443", "", ""},
		{"10.1.2.3:22", reasonPrivate, "--allow-host 10.1.2.3:22"},
		{"10.1.2.4:443", reasonPrivate, "--allow-host 10.1.2.4 (or the range --allow-host 10.0.0.0/8)"},
		{"93.184.216.34:8080", "", ""},
		{"93.184.216.34:443", reasonNotAllowed, "--allow-host 93.184.216.34"},
		{"127.0.0.1:443", reasonLoopback, ""},
		{"[::ffff:169.254.169.254]:80", reasonMetadata, ""},
		{"[64:ff9b::7f00:1]:443", reasonLoopback, ""},
		{"[2002:7f00:1::]:443", reasonLoopback, ""},
	}
	for _, tt := range tests {
		tg, err := parseTarget(tt.target, 0)
		if err != nil {
			t.Fatalf("parseTarget(%q): %v", tt.target, err)
		}
		d := p.decide(context.Background(), "CONNECT", tt.target, tg)
		got := ""
		if d.refusal != nil {
			got = d.refusal.reason
		}
		if got != tt.reason {
			t.Errorf("decide(%s) reason = %q, want %q (%+v)", tt.target, got, tt.reason, d.refusal)
			continue
		}
		if d.refusal != nil && !strings.Contains(d.refusal.fix, tt.fix) {
			t.Errorf("decide(%s) fix = %q, want it to contain %q", tt.target, d.refusal.fix, tt.fix)
		}
		if d.refusal == nil && len(d.ips) == 0 {
			t.Errorf("decide(%s) allowed with no addresses to dial", tt.target)
		}
	}
}

// TestControlRecheck drives the dialer's re-check directly: addresses and
// ports that the decision did not check are refused.
func TestControlRecheck(t *testing.T) {
	p, err := New(Config{Allow: []string{"public.test", "10.1.2.3"},
		Resolver: newResolver(map[string][]string{"public.test": {"93.184.216.34"}})})
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := parseTarget("public.test:443", 0)
	d := p.decide(context.Background(), "CONNECT", "public.test:443", tg)
	if d.refusal != nil {
		t.Fatalf("control decision refused: %+v", d.refusal)
	}
	tests := []struct {
		ap   string
		want bool
	}{
		{"93.184.216.34:443", true},
		{"[::ffff:93.184.216.34]:443", true},
		{"93.184.216.34:80", false},
		{"93.184.216.35:443", false},
		{"127.0.0.1:443", false},
		{"10.1.2.3:443", false}, // allowed in general, but not what this decision checked
	}
	for _, tt := range tests {
		if got := p.permits(d, netip.MustParseAddrPort(tt.ap)); got != tt.want {
			t.Errorf("permits(%s) = %v, want %v", tt.ap, got, tt.want)
		}
	}
	// A decision whose address list was tampered with is still re-judged.
	bad := &decision{t: mustTarget(t, "public.test", 443), ips: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}
	if p.permits(bad, netip.MustParseAddrPort("127.0.0.1:443")) {
		t.Error("permits accepted loopback because a decision listed it")
	}
}

// BenchmarkDecide is the proxy's decision for one request: parse the
// target, match the allow-list, resolve (a fixed answer here) and judge
// every address. It runs before every connection the proxy opens.
func BenchmarkDecide(b *testing.B) {
	entries := []string{"*.example.com", "api.github.com:443", "10.1.2.3"}
	for i := 0; i < 100; i++ {
		entries = append(entries, fmt.Sprintf("host%d.example.org", i))
	}
	p, err := New(Config{Allow: entries, Resolver: newResolver(map[string][]string{"www.example.com": {"93.184.216.34"}})})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		t, err := parseTarget("www.example.com:443", 443)
		if err != nil {
			b.Fatal(err)
		}
		if d := p.decide(b.Context(), "CONNECT", "www.example.com:443", t); d.refusal != nil {
			b.Fatal(d.refusal.reason)
		}
	}
}

// mustTarget is the target a client names as host:port.
func mustTarget(tb testing.TB, host string, port uint16) target {
	tb.Helper()
	tg, err := parseTarget(net.JoinHostPort(host, strconv.Itoa(int(port))), 0)
	if err != nil {
		tb.Fatal(err)
	}
	return tg
}
