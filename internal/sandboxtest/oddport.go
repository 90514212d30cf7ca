package sandboxtest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// OddPort is the port on which every test host also serves a plain TCP
// service (no HTTP: it writes "hello from 4567\n" and closes) and a UDP
// listener that counts the datagrams it receives: targets for clients
// that know nothing of proxies.
const OddPort = 4567

// OddGreeting is what the TCP service on OddPort writes.
const OddGreeting = "hello from 4567"

// serveOddPort starts the odd-port services of a test host at host and
// adds /tcpcount and /udpcount (connections accepted, datagrams received
// so far) to mux.
func serveOddPort(host string, mux *http.ServeMux) error {
	addr := net.JoinHostPort(host, strconv.Itoa(OddPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		ln.Close()
		return err
	}
	var tcpN, udpN atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tcpN.Add(1)
			io.WriteString(c, OddGreeting+"\n")
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 65536)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			udpN.Add(1)
		}
	}()
	mux.HandleFunc("/tcpcount", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, tcpN.Load()) })
	mux.HandleFunc("/udpcount", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, udpN.Load()) })
	return nil
}

// OddCounts reads, directly, how many TCP connections the odd-port
// service accepted and how many UDP datagrams it received so far.
func (h TestHost) OddCounts(t testing.TB) (tcp, udp int) {
	t.Helper()
	c := http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	get := func(path string) int {
		resp, err := c.Get("http://" + h.HostPort() + path)
		if err != nil {
			t.Fatalf("direct GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		n, err := strconv.Atoi(string(b))
		if err != nil {
			t.Fatalf("%s: %q", path, b)
		}
		return n
	}
	return get("/tcpcount"), get("/udpcount")
}
