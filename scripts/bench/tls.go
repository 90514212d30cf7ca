//go:build linux

package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/proxy"
)

// tlsPort is where serve-tls listens on the test host's address.
const tlsPort = 8443

// serveTLSMain is the hidden mode `serve-tls ADDR CAFILE`: an HTTPS server
// (HTTP/1.1 and HTTP/2) with a CA of its own, whose certificate it writes
// to CAFILE; /ok and /bytes?n=N as `serve`. It prints "ready" once
// listening and exits when stdin closes.
func serveTLSMain(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: serve-tls ADDR CAFILE")
		return 2
	}
	ap, err := netip.ParseAddrPort(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cert, caPEM, err := selfCA(ap.Addr())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.WriteFile(args[1], caPEM, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok from test host") })
	mux.HandleFunc("/bytes", sandboxtest.ServeBytes)
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	fmt.Println("ready")
	tl := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	_ = (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(tl)
	return 1
}

// selfCA makes a CA and a certificate it signs for ip.
func selfCA(ip netip.Addr) (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	caT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench test host CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caT, caT, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leafT := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip.String()}, IPAddresses: []net.IP{ip.AsSlice()},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leafT, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

// tlsResults is the TLS section: downloads through a terminating rule and
// through a plain tunnel to the same HTTPS host, interleaved, and
// requests per second at many connections with a method rule and without.
type tlsResults struct {
	size       int64
	throughput map[string][]float64 // MiB/s per download
	rps        map[string][]float64
	conns, n   int
	also       string // the name of the -also build's downloads, "" when none
	err        error
}

const (
	tTerm   = "sandbox-run --allow-http (terminated)"
	tTunnel = "sandbox-run --allow-host (tunnel)"
	rRule   = "proxy, method rule (terminated)"
	rTunnel = "proxy, tunnel"
)

// tlsOpts shape the TLS section: download size and rounds, the load's
// connections and requests per connection, and only (when not empty) the
// one path to measure, for profiling it alone (tls-only -only).
type tlsOpts struct {
	size          int64
	rounds, conns int
	n             int
	only          string
	also          string // another sandbox-run binary whose terminated downloads are interleaved too
}

func (o tlsOpts) wants(name string) bool { return o.only == "" || o.only == name }

// measureTLS starts serve-tls beside the test host and runs both series.
func (e *env) measureTLS(h *testHost, o tlsOpts, deadline time.Time) *tlsResults {
	res := &tlsResults{size: o.size, throughput: map[string][]float64{}, rps: map[string][]float64{}, conns: o.conns, n: o.n}
	caFile := filepath.Join(e.binDir, "tls-host-ca.pem") // read-only inside, outside every writable dir
	ap := netip.AddrPortFrom(h.addr.Addr(), tlsPort)
	srv := exec.Command("ip", "netns", "exec", h.ns, e.exe, "serve-tls", ap.String(), caFile)
	srv.Stderr, srv.WaitDelay = os.Stderr, 5*time.Second
	stdin, _ := srv.StdinPipe()
	out, _ := srv.StdoutPipe()
	if err := srv.Start(); err != nil {
		res.err = err
		return res
	}
	defer func() { stdin.Close(); _ = srv.Wait() }()
	if err := waitLine(out, 20*time.Second, func(l string) bool { return l == "ready" }); err != nil {
		res.err = fmt.Errorf("serve-tls: %w", err)
		return res
	}
	if res.err = e.tlsDownloads(res, ap, caFile, o, deadline); res.err != nil {
		return res
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		res.err = err
		return res
	}
	res.err = tlsLoads(res, ap, caPEM, o, deadline)
	return res
}

// tlsDownloads fetches o.size bytes over HTTPS inside sandbox-run through
// a terminating rule and through a tunnel, interleaved, in o.rounds
// rounds (at least one).
func (e *env) tlsDownloads(res *tlsResults, ap netip.AddrPort, caFile string, o tlsOpts, deadline time.Time) error {
	u := fmt.Sprintf("https://%s/bytes?n=%d", ap, o.size)
	term := []string{"--allow-http", "GET " + ap.String() + "/bytes", "--upstream-ca", caFile}
	variants := map[string][]string{
		tTerm:   term,
		tTunnel: {"--allow-host", ap.String(), "--env", "SSL_CERT_FILE=" + caFile},
	}
	bins := map[string]string{tTerm: e.bin, tTunnel: e.bin}
	names := []string{tTerm, tTunnel}
	if o.also != "" {
		name := tTermAlso(o.also)
		variants[name], bins[name] = term, o.also
		names = append(names, name)
		res.also = name
	}
	for r := 0; r < o.rounds && (r == 0 || time.Now().Before(deadline)); r++ {
		for k := range names {
			name := names[(k+r)%len(names)]
			if !o.wants(name) {
				continue
			}
			args := append([]string{"run", "--workdir", e.work, "--read", e.binDir}, variants[name]...)
			bin := bins[name]
			v := netVariant{name, func(ctx context.Context, a []string) *exec.Cmd {
				return exec.CommandContext(ctx, bin, append(append(args, "--", e.exe, "fetch"), a...)...)
			}}
			fr, err := netRun(v, []string{"-url", u}, 3*time.Minute)
			if err == nil && fr.Bytes != o.size {
				err = fmt.Errorf("got %d bytes, want %d", fr.Bytes, o.size)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			res.throughput[name] = append(res.throughput[name], float64(fr.Bytes)/(1<<20)/fr.Seconds)
		}
	}
	return nil
}

// tTermAlso names the terminated downloads of another build (tls-only
// -also BIN).
func tTermAlso(bin string) string { return tTerm + ", " + bin }

// tlsLoads runs tlsLoad with a method rule and through a tunnel,
// interleaved, in o.rounds rounds (at least one).
func tlsLoads(res *tlsResults, ap netip.AddrPort, caPEM []byte, o tlsOpts, deadline time.Time) error {
	for r := 0; r < o.rounds && (r == 0 || time.Now().Before(deadline)); r++ {
		for _, rule := range []bool{r%2 == 0, r%2 != 0} {
			name := map[bool]string{true: rRule, false: rTunnel}[rule]
			if !o.wants(name) {
				continue
			}
			rps, err := tlsLoad(ap, caPEM, rule, o.conns, o.n)
			if err != nil {
				return err
			}
			res.rps[name] = append(res.rps[name], rps)
		}
	}
	return nil
}

// tlsLoad runs the egress proxy in this process on a Unix socket, with a
// method rule for the host (rule) or an allow-list entry (a tunnel), and
// conns clients of one connection each making n GETs of /ok; it returns
// requests per second over the whole batch, handshakes included.
func tlsLoad(ap netip.AddrPort, hostCA []byte, rule bool, conns, n int) (float64, error) {
	hostPool := x509.NewCertPool()
	hostPool.AppendCertsFromPEM(hostCA)
	cfg := proxy.Config{Allow: []string{ap.String()}}
	if rule {
		cfg = proxy.Config{HTTPRules: []string{"GET " + ap.String() + "/ok"}, UpstreamRoots: hostPool}
	}
	p, err := proxy.New(cfg)
	if err != nil {
		return 0, err
	}
	roots := hostPool
	if rule {
		roots = x509.NewCertPool()
		roots.AppendCertsFromPEM(p.CACertificatePEM())
	}
	dir, err := os.MkdirTemp("", "sbx-bench-tls-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "p.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Serve(ctx, ln)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{
				Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress-proxy"}),
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, "unix", sock)
				},
				TLSClientConfig: &tls.Config{RootCAs: roots}, MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1,
			}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: time.Minute}
			for range n {
				resp, err := c.Get("https://" + ap.String() + "/ok")
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %s", resp.Status)
					}
				}
				if err != nil {
					mu.Lock()
					firstErr = cmpOr(firstErr, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if firstErr != nil {
		return 0, fmt.Errorf("tls load (rule %v): %w", rule, firstErr)
	}
	return float64(conns*n) / el.Seconds(), nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func medianF(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// tlsSection writes the TLS section of the report.
func (r *report) tlsSection(w func(string, ...any)) {
	t := r.tls
	if t == nil {
		return
	}
	w("## TLS termination (--allow-http)\n\n")
	if t.err != nil {
		w("Not measured: %v\n\n", t.err)
		return
	}
	w("Downloads of %d MiB over HTTPS from the test host, inside sandbox-run, through a terminating rule and through a plain tunnel to the same host, interleaved (MiB/s):\n\n", t.size>>20)
	w("| path | median | runs |\n|---|---|---|\n")
	for _, name := range []string{tTerm, tTunnel, t.also} {
		if name != "" {
			w("| %s | %.0f | %s |\n", name, medianF(t.throughput[name]), fmtFloats(t.throughput[name]))
		}
	}
	if a, b := medianF(t.throughput[tTerm]), medianF(t.throughput[tTunnel]); a > 0 && b > 0 {
		w("\nTerminated / tunnel: **%.2fx** (goal ≥ 0.7x: %s).\n", a/b, strings.ReplaceAll(verdict(a/b >= 0.7, fmt.Sprintf("by %.2fx", 0.7-a/b)), "**", ""))
	}
	if a, b := medianF(t.throughput[t.also]), medianF(t.throughput[tTunnel]); a > 0 && b > 0 {
		w("\nThe other build (-also) terminated / tunnel: %.2fx.\n", a/b)
	}
	w("\n")
	w("Requests per second through the proxy at %d connections (each a CONNECT, a TLS handshake, then %d GETs of /ok kept alive):\n\n", t.conns, t.n)
	w("| path | median req/s | runs |\n|---|---|---|\n")
	for _, name := range []string{rRule, rTunnel} {
		w("| %s | %.0f | %s |\n", name, medianF(t.rps[name]), fmtFloats(t.rps[name]))
	}
	if a, b := medianF(t.rps[rRule]), medianF(t.rps[rTunnel]); a > 0 && b > 0 {
		w("\nMethod rule / tunnel: **%.2fx** (no goal set).\n", a/b)
	}
	w("\n")
}

// tlsGoals are the TLS section's rows of the summary: the download ratio
// against its goal, and requests per second with a method rule against a
// tunnel (no goal set), each with the medians it divides.
func (r *report) tlsGoals() [][3]string {
	t := r.tls
	if t == nil {
		return nil
	}
	const dl, rps = "TLS: terminated download ≥ 0.7x a tunnel to the same host", "TLS: req/s with a method rule vs a tunnel, 100 connections (no goal set)"
	if t.err != nil {
		why := "failed: " + oneLine(t.err.Error())
		return [][3]string{{dl, "not measured", why}, {rps, "not measured", why}}
	}
	var rows [][3]string
	if a, b := medianF(t.throughput[tTerm]), medianF(t.throughput[tTunnel]); a > 0 && b > 0 {
		rows = append(rows, [3]string{dl, fmt.Sprintf("%.2fx (%.0f / %.0f MiB/s, medians of %d)", a/b, a, b, len(t.throughput[tTerm])),
			verdict(a/b >= 0.7, fmt.Sprintf("by %.2fx", 0.7-a/b))})
	}
	if a, b := medianF(t.rps[rRule]), medianF(t.rps[rTunnel]); a > 0 && b > 0 {
		rows = append(rows, [3]string{rps, fmt.Sprintf("%.2fx (%.0f / %.0f req/s, medians of %d)", a/b, a, b, len(t.rps[rRule])), "—"})
	}
	return rows
}

func fmtFloats(xs []float64) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.0f", x)
	}
	return s
}

// measureNetTLS is the network section (measureNet) and then the TLS one.
func (e *env) measureNetTLS(nvs []netVariant, h *testHost, size int64, rounds, latN, perConn int, deadline time.Time) (*netResults, *tlsResults) {
	r := measureNet(nvs, h, size, rounds, 4, latN, deadline)
	fmt.Fprintf(os.Stderr, "bench: TLS termination: %d downloads per path, 100 connections\n", rounds)
	return &r, e.measureTLS(h, tlsOpts{size: size, rounds: rounds, conns: 100, n: perConn}, deadline)
}

// tlsOnlyMain is the mode `tls-only [-bin BIN] [-size N] [-rounds N]
// [-per-conn N] [-only PATH] [-also BIN]`: the TLS section alone,
// printed, nothing written. -also interleaves the terminated downloads of
// another build (to compare two builds in one run).
func tlsOnlyMain(args []string) int {
	fs := flag.NewFlagSet("tls-only", flag.ContinueOnError)
	bin := fs.String("bin", "bin/sandbox-run", "sandbox-run binary")
	size := fs.Int64("size", 64<<20, "download size in bytes")
	rounds := fs.Int("rounds", 4, "downloads and load runs per path")
	perConn := fs.Int("per-conn", 10, "requests per connection")
	only := fs.String("only", "", "measure only this path (one of the table's names), for profiling")
	also := fs.String("also", "", "another sandbox-run binary (an older build) whose terminated downloads are interleaved with the others")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	defer runCleanups()
	if *also != "" {
		abs, err := filepath.Abs(*also)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -also:", err)
			return 2
		}
		*also = abs
	}
	e, err := setup(*bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: setup:", err)
		return 1
	}
	deadline := time.Now().Add(20 * time.Minute)
	h, err := newTestHost(e.exe)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: test host:", err)
		return 1
	}
	atExit(h.close)
	r := &report{tls: e.measureTLS(h, tlsOpts{size: *size, rounds: *rounds, conns: 100, n: *perConn, only: *only, also: *also}, deadline)}
	r.tlsSection(func(format string, a ...any) { fmt.Printf(format, a...) })
	for _, row := range r.tlsGoals() {
		fmt.Printf("%s: %s %s\n", row[0], row[1], strings.ReplaceAll(row[2], "**", ""))
	}
	if r.tls.err != nil {
		return 1
	}
	return 0
}
