package matrix

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/sandbox-run/sandbox-run/internal/probe"
)

// canaries are the targets the attempts aim at. Each answers with
// probe.CanaryReply, so that a probe knows it reached this very canary and not
// something else on the same address.
type canaries struct {
	tcp        net.Listener   // every address of the host, both families
	udp        net.PacketConn // 127.0.0.1
	dns        *dnsCanary
	unix       net.Listener
	abstract   net.Listener
	redirector *http.Server
	wg         sync.WaitGroup
}

func (c *canaries) close() {
	for _, l := range []io.Closer{c.tcp, c.udp, c.unix, c.abstract} {
		if l != nil {
			l.Close()
		}
	}
	if c.dns != nil {
		c.dns.conn.Close()
	}
	if c.redirector != nil {
		c.redirector.Close()
	}
	c.wg.Wait()
}

// serveStream answers every connection of ln with an HTTP response
// carrying probe.CanaryReply, after reading the request head (bounded).
func (c *canaries) serveStream(ln net.Listener) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(3 * time.Second))
				if _, ok := conn.(*net.TCPConn); ok {
					readHead(conn)
				}
				fmt.Fprintf(conn, "HTTP/1.0 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(probe.CanaryReply), probe.CanaryReply)
			}()
		}
	}()
}

// readHead reads until the end of an HTTP request head, or a second.
func readHead(conn net.Conn) {
	conn.SetReadDeadline(time.Now().Add(time.Second))
	var got []byte
	b := make([]byte, 1024)
	for len(got) < 16<<10 && !strings.Contains(string(got), "\r\n\r\n") {
		n, err := conn.Read(b)
		got = append(got, b[:n]...)
		if err != nil {
			break
		}
	}
	conn.SetReadDeadline(time.Time{})
}

func (c *canaries) serveUDP() {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		b := make([]byte, 512)
		for {
			_, from, err := c.udp.ReadFrom(b)
			if err != nil {
				return
			}
			c.udp.WriteTo([]byte(probe.CanaryReply), from)
		}
	}()
}

// dnsCanary answers A queries over UDP: loop.test is 127.0.0.1,
// rebind.test alternates between a public address and 127.0.0.1, every
// other name 127.0.0.1. It records every name it is asked.
type dnsCanary struct {
	conn   net.PacketConn
	mu     sync.Mutex
	seen   map[string]int
	rebind int
}

func (d *dnsCanary) asked(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seen[strings.ToLower(strings.TrimSuffix(name, "."))] > 0
}

func (d *dnsCanary) serve(wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		b := make([]byte, 1500)
		for {
			n, from, err := d.conn.ReadFrom(b)
			if err != nil {
				return
			}
			if resp, err := d.answer(b[:n]); err == nil {
				d.conn.WriteTo(resp, from)
			}
		}
	}()
}

func (d *dnsCanary) answer(q []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil, err
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		return nil, errors.New("one question expected")
	}
	question := qs[0]
	name := strings.ToLower(strings.TrimSuffix(question.Name.String(), "."))
	d.mu.Lock()
	if d.seen == nil {
		d.seen = map[string]int{}
	}
	d.seen[name]++
	ip := [4]byte{127, 0, 0, 1}
	if name == "rebind.test" && question.Type == dnsmessage.TypeA {
		if d.rebind%2 == 0 {
			ip = [4]byte{198, 51, 100, 7}
		}
		d.rebind++
	}
	d.mu.Unlock()
	bld := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired})
	bld.EnableCompression()
	if err := bld.StartQuestions(); err != nil {
		return nil, err
	}
	if err := bld.Question(question); err != nil {
		return nil, err
	}
	if err := bld.StartAnswers(); err != nil {
		return nil, err
	}
	if question.Type == dnsmessage.TypeA {
		rh := dnsmessage.ResourceHeader{Name: question.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 0}
		if err := bld.AResource(rh, dnsmessage.AResource{A: ip}); err != nil {
			return nil, err
		}
	}
	return bld.Finish()
}

// newRedirector serves /redirect on addr: a 302 to target.
func newRedirector(ln net.Listener, target string, wg *sync.WaitGroup) *http.Server {
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target, http.StatusFound)
		}),
		ReadHeaderTimeout: 3 * time.Second,
	}
	wg.Add(1)
	go func() { defer wg.Done(); srv.Serve(ln) }()
	return srv
}

// resolverFor is the node proxy's resolver: the DNS canary only.
func resolverFor(addr string) *net.Resolver { return probe.DNSResolver(addr) }

// portCanary is a UDP canary bound on the host at an address a probe names
// at run time (udp-proxy-port: the egress proxy's port, which only the
// sandbox's environment tells). It echoes probe.CanaryReply and records every
// payload it receives: the judge asks it, not the probe.
type portCanary struct {
	conn net.PacketConn
	mu   sync.Mutex
	got  map[string]bool
	done chan struct{}
}

// portCanaryBind bounds how long the runner waits for a port another
// process holds (another matrix run's canary on the same fixed port).
const portCanaryBind = 8 * time.Second

// listenPortCanary binds a UDP canary at addr, retrying while the address
// is in use until wait has passed.
func listenPortCanary(addr string, wait time.Duration) (*portCanary, error) {
	deadline := time.Now().Add(wait)
	for {
		conn, err := net.ListenPacket("udp", addr)
		if err == nil {
			pc := &portCanary{conn: conn, got: map[string]bool{}, done: make(chan struct{})}
			go pc.serve()
			return pc, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (pc *portCanary) serve() {
	defer close(pc.done)
	b := make([]byte, 512)
	for {
		n, from, err := pc.conn.ReadFrom(b)
		if err != nil {
			return
		}
		pc.mu.Lock()
		pc.got[string(b[:n])] = true
		pc.mu.Unlock()
		pc.conn.WriteTo([]byte(probe.CanaryReply), from)
	}
}

// received reports whether payload arrived, waiting up to grace for a
// datagram already sent to be read; then it closes the canary.
func (pc *portCanary) received(payload string, grace time.Duration) bool {
	deadline := time.Now().Add(grace)
	for {
		pc.mu.Lock()
		ok := pc.got[payload]
		pc.mu.Unlock()
		if ok || time.Now().After(deadline) {
			pc.close()
			return ok
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (pc *portCanary) close() {
	pc.conn.Close()
	<-pc.done
}
