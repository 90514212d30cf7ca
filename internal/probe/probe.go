// Package probe holds the attempts of the escape matrix: sandbox-run
// __probe PROBE [ARG...] makes one attempt to get out (read a flag file,
// reach a canary, survive the run, call what the seccomp filter denies)
// and says on standard output what it reached, in the protocol the
// matrix runner (internal/matrix) reads: zero or more
// "SUB name reached|blocked detail" lines and one
// "VERDICT reached|blocked detail" line.
//
// A probe's own belief is not the verdict: the runner judges an attempt by
// what reached its canary (a file on the host, a canary's log, a survivor
// in the process table). The probes run inside the sandbox and unconfined
// alike (the positive control), so none of them may depend on anything
// the sandbox hides.
package probe

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Arg is the hidden subcommand that runs one probe:
// sandbox-run __probe PROBE [ARG...].
const Arg = "__probe"

// Canary replies and probe verdicts. A probe prints zero or more
// "SUB name reached|blocked detail" lines and ends with one
// "VERDICT reached|blocked detail" line.
const (
	CanaryReply = "CANARY-REACHED"
	Reached     = "reached"
	Blocked     = "blocked"
)

// probeTimeout bounds every network attempt of a probe.
const probeTimeout = 3 * time.Second

type probeOut struct {
	w       io.Writer
	reached bool
	details []string
}

// sub records one attempt of the probe.
func (o *probeOut) sub(name string, ok bool, detail string) {
	v := Blocked
	if ok {
		v = Reached
		o.reached = true
	}
	detail = OneLine(detail)
	fmt.Fprintf(o.w, "SUB %s %s %s\n", name, v, detail)
	if ok {
		o.details = append(o.details, name+": "+detail)
	}
}

func (o *probeOut) verdict(detail string) int {
	v := Blocked
	if o.reached {
		v = Reached
		detail = strings.Join(o.details, "; ")
	}
	fmt.Fprintf(o.w, "VERDICT %s %s\n", v, OneLine(detail))
	return 0
}

// OneLine is s on one line of at most 303 bytes, as a probe writes every
// detail and the runner quotes a probe's stderr: whitespace runs become
// one space, and a longer text is cut at 300 bytes with "..." after it.
func OneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// ErrText is the innermost error's text: "permission denied", not the
// path again.
func ErrText(err error) string {
	if err == nil {
		return "ok"
	}
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err.Error()
		}
		err = u.Unwrap()
	}
}

// Main runs sandbox-run __probe ARGS (args without "__probe") and returns
// the exit status: 0 when the probe ran (whatever its verdict), 2 on a
// usage error. It is what the escape matrix runs, inside the sandbox and
// unconfined as its positive control; it is not a command for people.
func Main(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: sandbox-run __probe PROBE [ARG...]")
		return 2
	}
	o := &probeOut{w: os.Stdout}
	name, a := args[0], args[1:]
	p, ok := commonProbe(name)
	if !ok {
		return probeOS(o, name, a)
	}
	if len(a) < p.min {
		fmt.Fprintf(os.Stderr, "__probe %s: want at least %d arguments\n", name, p.min)
		return 2
	}
	return p.run(o, a)
}

// probe is one attempt Main can run: the arguments it needs at least,
// and the attempt itself, which writes SUB and VERDICT lines to o.
type probe struct {
	min int
	run func(o *probeOut, a []string) int
}

// commonProbe returns the probe called name that every platform has; the
// others are probeOS's.
func commonProbe(name string) (probe, bool) {
	switch name {
	case "read-file": // PATH... TOKEN
		return probe{2, probeReadFile}, true
	case "hardlink": // SRC DST TOKEN
		return probe{3, probeHardlink}, true
	case "read-fds": // TOKEN
		return probe{1, probeReadFDs}, true
	case "write-paths": // PATH | dir:PATH ...
		return probe{0, probeWritePaths}, true
	case "rename-trick":
		return probe{0, probeRenameTrick}, true
	case "tcp-connect": // ADDR...
		return probe{0, each(tcpReach, "no canary answered")}, true
	case "udp-echo": // ADDR...
		return probe{0, each(func(addr string) (bool, string) { return udpReach(addr, "ping") }, "no datagram came back")}, true
	case "udp-proxy-port": // PAYLOAD: UDP to the port the proxy variable names
		return probe{1, func(o *probeOut, a []string) int { return udpProxyPort(o, a[0], os.Getenv, os.Stdin) }}, true
	case "dns-query": // SERVER NAME
		return probe{2, probeDNS}, true
	case "unix-connect": // PATH | @NAME ...
		return probe{0, each(unixReach, "no Unix socket canary answered")}, true
	case "http-get": // [--dns ADDR] [--follow] [--connect] [--repeat N] URL...
		return probe{0, httpProbe}, true
	case "spawn": // setsid|double-fork TAG [hold]
		return probe{2, probeSpawn}, true
	case "exec": // PROGRAM ARG...: run it; its effect is what the runner judges
		return probe{1, probeExec}, true
	case "sleeper": // TAG: what spawn leaves behind; bounded
		return probe{0, func(*probeOut, []string) int { time.Sleep(20 * time.Second); return 0 }}, true
	case "marker": // TAG: a same-uid process outside the sandbox; ends with stdin
		return probe{1, probeMarker}, true
	case "forker": // TAG: the middle of a double fork
		return probe{1, probeForker}, true
	}
	return probe{}, false
}

// each is a probe that tries reach on every argument, one SUB line each.
func each(reach func(string) (bool, string), none string) func(*probeOut, []string) int {
	return func(o *probeOut, a []string) int {
		for _, addr := range a {
			ok, d := reach(addr)
			o.sub(addr, ok, d)
		}
		return o.verdict(none)
	}
}

func probeReadFile(o *probeOut, a []string) int {
	tok := a[len(a)-1]
	for _, p := range a[:len(a)-1] {
		b, err := readSome(p)
		o.sub(p, err == nil && strings.Contains(string(b), tok), readDetail(b, err, tok))
	}
	return o.verdict("no path yielded the flag")
}

func probeHardlink(o *probeOut, a []string) int {
	err := os.Link(a[0], a[1])
	if err == nil {
		b, rerr := readSome(a[1])
		o.sub("link", rerr == nil && strings.Contains(string(b), a[2]), readDetail(b, rerr, a[2]))
		os.Remove(a[1])
	} else {
		o.sub("link", false, "link: "+ErrText(err))
	}
	return o.verdict("no link to the flag")
}

func probeReadFDs(o *probeOut, a []string) int {
	for fd := 3; fd < 64; fd++ {
		b := make([]byte, 256)
		n, err := preadFD(fd, b)
		if err == nil && strings.Contains(string(b[:n]), a[0]) {
			o.sub("fd"+strconv.Itoa(fd), true, "read the flag from inherited fd "+strconv.Itoa(fd))
		}
	}
	return o.verdict("no open descriptor above 2 holds the flag")
}

func probeWritePaths(o *probeOut, a []string) int {
	for _, p := range a {
		o.sub(p, writeOne(p) == nil, ErrText(writeOne(p)))
	}
	return o.verdict("every write refused")
}

func probeRenameTrick(o *probeOut, _ []string) int {
	os.Rename(".git", "g2")
	os.MkdirAll(".git/hooks", 0o755)
	err := os.WriteFile(".git/hooks/pre-commit", []byte("#!/bin/sh\necho planted\n"), 0o755)
	o.sub("pre-commit", err == nil, "plant .git/hooks/pre-commit after renaming .git: "+ErrText(err))
	return o.verdict("the hook could not be planted")
}

func probeDNS(o *probeOut, a []string) int {
	ips, err := DNSResolver(a[0]).LookupNetIP(context.Background(), "ip4", a[1])
	o.sub("udp", err == nil && len(ips) > 0, fmt.Sprintf("%s via %s: %v %s", a[1], a[0], ips, ErrText(err)))
	return o.verdict("the DNS canary did not answer")
}

func probeSpawn(o *probeOut, a []string) int {
	if err := spawnSurvivor(a[0], a[1]); err != nil {
		fmt.Fprintf(o.w, "VERDICT blocked could not start the child: %s\n", OneLine(ErrText(err)))
		return 0
	}
	fmt.Fprintln(o.w, "SPAWNED")
	if len(a) > 2 && a[2] == "hold" {
		time.Sleep(30 * time.Second) // killed long before, with sandbox-run
	}
	fmt.Fprintln(o.w, "VERDICT blocked the runner judges what is left")
	return 0
}

func probeExec(o *probeOut, a []string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, a[0], a[1:]...).CombinedOutput()
	o.sub("exec", err == nil, fmt.Sprintf("%s: %s %s", a[0], ErrText(err), OneLine(string(out))))
	return o.verdict("the program failed")
}

func probeMarker(_ *probeOut, a []string) int {
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	// A kernel key with a tagged description, in an anonymous session
	// keyring that dies with this process: what /proc/keys shows a
	// process of the same uid.
	if err := markerKey("sbx-check-" + a[0]); err != nil {
		fmt.Fprintln(os.Stderr, "marker: no kernel key:", err)
	}
	fmt.Println("ready")
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
	}
	return 0
}

func probeForker(_ *probeOut, a []string) int {
	if err := startDetached(os.Args[0], []string{Arg, "sleeper", a[0]}, true); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func readSome(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 4096))
}

func readDetail(b []byte, err error, tok string) string {
	switch {
	case err != nil:
		return ErrText(err)
	case strings.Contains(string(b), tok):
		return "read the flag"
	}
	return fmt.Sprintf("read %d bytes without the flag", len(b))
}

// writeOne creates or appends to p ("dir:P" plants a file in directory P),
// making the parents it needs.
func writeOne(p string) error {
	if d, ok := strings.CutPrefix(p, "dir:"); ok {
		os.MkdirAll(d, 0o755)
		p = filepath.Join(d, "planted")
	} else {
		os.MkdirAll(filepath.Dir(p), 0o755)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString("planted by the escape matrix\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func tcpReach(addr string) (bool, string) {
	c, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return false, "connect: " + ErrText(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(probeTimeout))
	io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
	b, _ := io.ReadAll(io.LimitReader(c, 4096))
	if strings.Contains(string(b), CanaryReply) {
		return true, "the canary answered"
	}
	return false, fmt.Sprintf("connected, but %d bytes without the canary's reply", len(b))
}

// udpReach sends payload to addr and reports whether the canary echoed.
func udpReach(addr, payload string) (bool, string) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return false, "dial: " + ErrText(err)
	}
	defer c.Close()
	b := make([]byte, 512)
	for i := 0; i < 3; i++ { // UDP may drop; three tries, one second each
		if _, err := c.Write([]byte(payload)); err != nil {
			return false, "send: " + ErrText(err)
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, err := c.Read(b)
		if err == nil && strings.Contains(string(b[:n]), CanaryReply) {
			return true, "the canary echoed"
		}
		if err != nil && !isTimeout(err) {
			return false, "receive: " + ErrText(err)
		}
	}
	return false, "no reply"
}

// proxyVars are the variables the egress proxy's address is read from, in
// the order tried: what sandbox-run sets for the command (setProxyEnv).
var proxyVars = []string{"HTTP_PROXY", "http_proxy"}

// proxyUDPAddr is the address, host and port, that the first set proxy
// variable names, with a host name resolved: where a datagram "to the
// proxy's port" goes. A variable without an explicit port is an error, not
// a guess.
func proxyUDPAddr(getenv func(string) string) (string, error) {
	for _, k := range proxyVars {
		v := getenv(k)
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil {
			return "", fmt.Errorf("%s=%q: %w", k, v, err)
		}
		if u.Port() == "" || u.Hostname() == "" {
			return "", fmt.Errorf("%s=%q names no host and port", k, v)
		}
		a, err := net.ResolveUDPAddr("udp", u.Host)
		if err != nil {
			return "", fmt.Errorf("%s=%q: %w", k, v, err)
		}
		return a.String(), nil
	}
	return "", fmt.Errorf("no proxy variable (%s) is set", strings.Join(proxyVars, ", "))
}

// udpProxyPort sends payload over UDP to the port of the egress proxy the
// command's environment names. It prints "PORT ADDR" first and sends only
// once the runner answers "GO" on stdin, having bound its UDP canary at
// ADDR on the host in between (the runner cannot know the port before the
// sandbox is set up). Without a proxy variable or a GO it prints no
// verdict, so that the case is untested rather than held. The echo it
// reports is the probe's own view; the runner judges by what its canary
// received.
func udpProxyPort(o *probeOut, payload string, getenv func(string) string, in io.Reader) int {
	addr, err := proxyUDPAddr(getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "__probe udp-proxy-port:", err)
		return 1
	}
	fmt.Fprintf(o.w, "PORT %s\n", addr)
	line := make(chan string, 1)
	go func() { l, _ := bufio.NewReader(in).ReadString('\n'); line <- strings.TrimSpace(l) }()
	select {
	case l := <-line:
		if l != "GO" {
			fmt.Fprintf(os.Stderr, "__probe udp-proxy-port: the runner said %q, not GO\n", l)
			return 1
		}
	case <-time.After(PortGoWait):
		fmt.Fprintln(os.Stderr, "__probe udp-proxy-port: no GO from the runner")
		return 1
	}
	ok, d := udpReach(addr, payload)
	o.sub("udp", ok, addr+": "+d)
	return o.verdict("nothing on the proxy's port echoed")
}

// PortGoWait bounds how long udp-proxy-port waits for the runner's GO:
// longer than the runner may wait for the port (portCanaryBind).
const PortGoWait = 15 * time.Second

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func unixReach(p string) (bool, string) {
	addr := p
	if strings.HasPrefix(p, "@") {
		addr = "@" + p[1:] // Go spells the abstract namespace with a leading @
	}
	c, err := net.DialTimeout("unix", addr, probeTimeout)
	if err != nil {
		return false, "connect: " + ErrText(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(probeTimeout))
	b, _ := io.ReadAll(io.LimitReader(c, 256))
	if strings.Contains(string(b), CanaryReply) {
		return true, "the canary answered"
	}
	return false, "connected without the canary's reply"
}

// DNSResolver asks only server (host:port), over UDP.
func DNSResolver(server string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", server)
	}}
}

// httpProbe fetches each URL. Through the proxy when HTTP_PROXY is set
// (confined); otherwise directly (the positive control), resolving names
// through --dns and numeric hosts the way inet_aton(3) reads them, as a
// C program given the same URL would.
func httpProbe(o *probeOut, a []string) int {
	var dns string
	follow, connect, anyReply, repeat := false, false, false, 1
	for len(a) > 0 && strings.HasPrefix(a[0], "--") {
		switch a[0] {
		case "--dns":
			if len(a) < 2 {
				return 2
			}
			dns, a = a[1], a[1:]
		case "--follow":
			follow = true
		case "--connect":
			connect = true
		case "--any":
			anyReply = true
		case "--repeat":
			if len(a) < 2 {
				return 2
			}
			repeat, _ = strconv.Atoi(a[1])
			a = a[1:]
		default:
			return 2
		}
		a = a[1:]
	}
	proxyURL := os.Getenv("HTTP_PROXY")
	for _, raw := range a {
		for i := 0; i < repeat && i < 8; i++ {
			name := raw
			if repeat > 1 {
				name = fmt.Sprintf("%s#%d", raw, i+1)
			}
			ok, d := fetch(raw, proxyURL, dns, follow, connect, anyReply)
			o.sub(name, ok, d)
		}
	}
	return o.verdict("no request reached the canary")
}

// fetch reports whether raw reached the canary: its reply in the body, or,
// with anyReply (a target no canary can stand in for, such as a metadata
// service), any answer that is not the proxy's refusal.
func fetch(raw, proxyURL, dns string, follow, connect, anyReply bool) (bool, string) {
	u, err := url.Parse(raw)
	if err != nil {
		return false, "bad URL: " + err.Error()
	}
	if connect && proxyURL != "" {
		return connectTunnel(u, proxyURL)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	if proxyURL != "" {
		pu, err := url.Parse(proxyURL)
		if err != nil {
			return false, "bad HTTP_PROXY"
		}
		tr.Proxy = http.ProxyURL(pu)
	} else {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			var ips []netip.Addr
			if ip, ok := parseInetAton(host); ok {
				ips = []netip.Addr{ip}
			} else if ip, err := netip.ParseAddr(host); err == nil {
				ips = []netip.Addr{ip}
			} else if dns != "" {
				ips, err = DNSResolver(dns).LookupNetIP(ctx, "ip4", host)
				if err != nil {
					return nil, err
				}
			} else {
				ips, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host)
				if err != nil {
					return nil, err
				}
			}
			var d net.Dialer
			var last error
			for _, ip := range ips {
				c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
				if err == nil {
					return c, nil
				}
				last = err
			}
			return nil, last
		}
	}
	c := &http.Client{Transport: tr, Timeout: probeTimeout}
	hops := 0
	c.CheckRedirect = func(*http.Request, []*http.Request) error {
		hops++
		if !follow || hops > 3 {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := c.Get(raw)
	if err != nil {
		return false, "request: " + ErrText(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if strings.Contains(string(b), CanaryReply) {
		return true, fmt.Sprintf("the canary answered (status %d, %d redirects)", resp.StatusCode, hops)
	}
	if anyReply && resp.Header.Get("X-Sandbox-Refusal") == "" {
		return true, fmt.Sprintf("the target answered with status %d", resp.StatusCode)
	}
	return false, fmt.Sprintf("status %d refusal=%q after %d redirects", resp.StatusCode, resp.Header.Get("X-Sandbox-Refusal"), hops)
}

// connectTunnel asks the proxy for a CONNECT tunnel to u's host and speaks
// HTTP through it.
func connectTunnel(u *url.URL, proxyURL string) (bool, string) {
	pu, err := url.Parse(proxyURL)
	if err != nil {
		return false, "bad HTTP_PROXY"
	}
	c, err := net.DialTimeout("tcp", pu.Host, probeTimeout)
	if err != nil {
		return false, "proxy: " + ErrText(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(probeTimeout))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", u.Host, u.Host)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return false, "CONNECT: " + ErrText(err)
	}
	if resp.StatusCode != 200 {
		return false, fmt.Sprintf("CONNECT status %d refusal=%q", resp.StatusCode, resp.Header.Get("X-Sandbox-Refusal"))
	}
	io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
	b, _ := io.ReadAll(io.LimitReader(br, 4096))
	if strings.Contains(string(b), CanaryReply) {
		return true, "the canary answered through the tunnel"
	}
	return false, "tunnel opened without the canary's reply"
}

// parseInetAton reads the IPv4 spellings inet_aton(3) accepts: one to four
// parts, each decimal, octal (leading 0) or hex (0x); the last part fills
// the remaining bytes.
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 || s == "" {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 0, 32)
		if err != nil || p == "" {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	last := len(vals) - 1
	for i := 0; i < last; i++ {
		if vals[i] > 255 {
			return netip.Addr{}, false
		}
		n |= vals[i] << (24 - 8*uint(i))
	}
	if vals[last] >= 1<<(8*uint(4-last)) {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}
