//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandbox-run/sandbox-run/forwarder"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/proxy"
)

func TestMain(m *testing.M) {
	sandboxtest.ServeTestHost()
	os.Exit(m.Run())
}

// BenchmarkEgress downloads 16 MiB from a test host in a network namespace
// (root only) per iteration, with no proxy, straight through the egress
// proxy over TCP, and through the forwarder and the proxy on a Unix socket
// (sandbox-run's in-sandbox path, without the sandbox), all in this process.
// The ratios between the sub-benchmarks are what matter.
func BenchmarkEgress(b *testing.B) {
	const size = 16 << 20
	h := sandboxtest.NewTestHost(b, 0)
	target := "http://" + h.HostPort() + fmt.Sprintf("/bytes?n=%d", size)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)

	p, err := proxy.New(proxy.Config{Allow: []string{h.HostPort()}})
	if err != nil {
		b.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go p.Serve(ctx, tcp)
	sock := filepath.Join(b.TempDir(), "egress.sock")
	unix, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	go p.Serve(ctx, unix)
	fwd, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go forwarder.Serve(ctx, fwd, sock)

	for _, c := range []struct{ name, proxy string }{
		{"direct", ""},
		{"proxy-tcp", tcp.Addr().String()},
		{"forwarder+proxy", fwd.Addr().String()},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr := &http.Transport{}
			if c.proxy != "" {
				tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: c.proxy})
			}
			b.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr}
			buf := make([]byte, 256<<10)
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Get(target)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf)
				resp.Body.Close()
				if err != nil || n != size {
					b.Fatalf("got %d bytes, %v", n, err)
				}
			}
		})
	}
}
