package proxy

import (
	"io"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

func TestMain(m *testing.M) {
	sandboxtest.ServeTestHost()
	os.Exit(m.Run())
}

// TestRealHost runs the proxy against a real host on another network stack.
func TestRealHost(t *testing.T) {
	h := sandboxtest.NewTestHost(t, 0)
	cn := newCanary(t)

	// Positive control: the host answers directly, without the proxy.
	direct := http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}
	resp, err := direct.Get("http://" + h.HostPort() + "/ok")
	if err != nil {
		t.Fatalf("positive control: direct GET: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok from test host" {
		t.Fatalf("positive control: direct GET = %d %q", resp.StatusCode, b)
	}

	t.Run("allowed when an entry names the IP", func(t *testing.T) {
		pt := startProxy(t, Config{Allow: []string{h.HostPort()}})
		if resp, body := pt.get(t, "http://"+h.HostPort()+"/ok"); resp.StatusCode != 200 || body != "ok from test host" {
			t.Fatalf("GET through proxy: %d %q", resp.StatusCode, body)
		}
		resp, body, br, c := pt.connect(t, h.HostPort())
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %d %q", resp.StatusCode, body)
		}
		if resp, body := getThroughTunnel(t, br, c, "/ok"); resp.StatusCode != 200 || body != "ok from test host" {
			t.Fatalf("GET through tunnel: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("allowed by a CIDR entry", func(t *testing.T) {
		pt := startProxy(t, Config{Allow: []string{"198.18.0.0/15"}})
		if resp, body := pt.get(t, "http://"+h.HostPort()+"/ok"); resp.StatusCode != 200 {
			t.Fatalf("GET through proxy: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("refused when no entry names the IP", func(t *testing.T) {
		res := newResolver(map[string][]string{"testhost.test": {h.Addr.String()}})
		pt := startProxy(t, Config{Allow: []string{"testhost.test:*", "198.51.100.1"}, Resolver: res})
		before := h.Count(t)
		cases := []struct {
			name, reason, mention string
			do                    func() (*http.Response, string)
		}{
			{"GET by name", reasonPrivate, "add --allow-host " + h.HostPort(), func() (*http.Response, string) {
				return pt.get(t, "http://testhost.test:8080/ok")
			}},
			{"CONNECT by name", reasonPrivate, "a host name entry is not enough", func() (*http.Response, string) {
				r, b, _, _ := pt.connect(t, "testhost.test:8080")
				return r, b
			}},
			{"GET by IP", reasonPrivate, "198.18.0.0/15", func() (*http.Response, string) {
				return pt.get(t, "http://"+h.HostPort()+"/ok")
			}},
			{"CONNECT by IP", reasonPrivate, "add --allow-host " + h.HostPort(), func() (*http.Response, string) {
				r, b, _, _ := pt.connect(t, h.HostPort())
				return r, b
			}},
		}
		for _, tc := range cases {
			resp, body := tc.do()
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get(RefusalHeader) != tc.reason {
				t.Errorf("%s: %d %s=%q, want 403 %q; body %q", tc.name, resp.StatusCode, RefusalHeader,
					resp.Header.Get(RefusalHeader), tc.reason, body)
			}
			if !strings.Contains(body, tc.mention) {
				t.Errorf("%s: body %q does not mention %q", tc.name, body, tc.mention)
			}
		}
		if after := h.Count(t); after != before+1 { // +1: the /count request itself
			t.Errorf("test host accepted %d connections during the refusals, want 0", after-before-1)
		}
		if d := pt.dialed(); len(d) != 0 {
			t.Errorf("dialer was asked for %v during refusals", d)
		}
	})

	t.Run("redirect to loopback is returned, not followed", func(t *testing.T) {
		cn.reach(t, "127.0.0.1") // positive control
		base := cn.count.Load()
		pt := startProxy(t, Config{Allow: []string{h.HostPort()}})
		loc := "http://127.0.0.1:" + strconv.Itoa(cn.port) + "/"
		resp, body := pt.get(t, "http://"+h.HostPort()+"/redirect?to="+loc)
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != loc {
			t.Fatalf("GET /redirect = %d Location %q, want 302 %q; body %q", resp.StatusCode, resp.Header.Get("Location"), loc, body)
		}
		// The client following the redirect through the proxy is refused.
		resp, body = pt.get(t, resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(RefusalHeader) != reasonLoopback {
			t.Fatalf("following the redirect: %d %q", resp.StatusCode, body)
		}
		cn.reach(t, "127.0.0.1")
		if got := cn.count.Load() - base; got != 1 {
			t.Fatalf("canary accepted %d connections, want 0", got-1)
		}
		for _, ap := range pt.dialed() {
			if ap.Addr() != h.Addr {
				t.Fatalf("dialer was asked for %s", ap)
			}
		}
	})
}

// TestOwnAddressRefused: a service of the proxy host bound to its own veth
// address (an address of the host's interfaces, not loopback) is refused
// even when an allow-list range contains it, by IP and by a name that
// resolves to it; only an entry naming that exact address opens it.
// Controls: the service answers a direct dial, the exact entry reaches it
// through the proxy, and the test host at the other end of the veth, in
// the same allowed range, is reached.
func TestOwnAddressRefused(t *testing.T) {
	h := sandboxtest.NewTestHost(t, 1)
	cn := newCanaryOn(t, h.Local)
	cn.reach(t, h.Local.String()) // positive control: the service answers directly
	own := netip.AddrPortFrom(h.Local, uint16(cn.port)).String()

	res := newResolver(map[string][]string{"self.test": {h.Local.String()}})
	pt := startProxy(t, Config{Allow: []string{"198.18.0.0/15", "self.test:*"}, Resolver: res})
	base := cn.count.Load()
	for name, do := range map[string]func() (*http.Response, string){
		"GET by IP": func() (*http.Response, string) { return pt.get(t, "http://"+own+"/") },
		"CONNECT by IP": func() (*http.Response, string) {
			r, b, _, _ := pt.connect(t, own)
			return r, b
		},
		"GET by name": func() (*http.Response, string) {
			return pt.get(t, "http://self.test:"+strconv.Itoa(cn.port)+"/")
		},
	} {
		resp, body := do()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(RefusalHeader) != reasonOwnAddr {
			t.Errorf("%s: %d %s=%q, want 403 %q; body %q", name, resp.StatusCode, RefusalHeader, resp.Header.Get(RefusalHeader), reasonOwnAddr, body)
		}
		if !strings.Contains(body, "--allow-host "+own) {
			t.Errorf("%s: body %q does not name the exact entry that would open it", name, body)
		}
	}
	cn.reach(t, h.Local.String())
	if got := cn.count.Load() - base; got != 1 {
		t.Errorf("the host's own service accepted %d connections through the proxy, want 0", got-1)
	}
	if d := pt.dialed(); len(d) != 0 {
		t.Errorf("dialer was asked for %v during refusals", d)
	}

	// Control: the other end of the veth, in the same allowed range.
	if resp, body := pt.get(t, "http://"+h.HostPort()+"/ok"); resp.StatusCode != 200 || body != "ok from test host" {
		t.Fatalf("control: the test host in the allowed range: %d %q", resp.StatusCode, body)
	}

	// Control: the exact address named opens it, for GET and CONNECT.
	for _, entry := range []string{own, h.Local.String() + ":*", h.Local.String() + "/32"} {
		pt := startProxy(t, Config{Allow: []string{entry}})
		before := cn.count.Load()
		if resp, body := pt.get(t, "http://"+own+"/"); resp.StatusCode != http.StatusBadGateway && resp.StatusCode != 200 {
			t.Errorf("entry %s: GET %d %q, want the canary reached", entry, resp.StatusCode, body)
		}
		if resp, body, _, _ := pt.connect(t, own); resp.StatusCode != 200 {
			t.Errorf("entry %s: CONNECT %d %q", entry, resp.StatusCode, body)
		}
		cn.reach(t, h.Local.String())
		if got := cn.count.Load() - before; got < 2 {
			t.Errorf("entry %s: the service counted %d connections, want the proxy's and the control's", entry, got)
		}
	}
}
