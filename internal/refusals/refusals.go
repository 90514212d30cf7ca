// Package refusals collects what a run refused the sandboxed command (a
// connection, a name lookup, a socket, a port) so that each one can be named
// once, with the exact flag that would allow it, on stderr at the end of
// the run and in the report; a Collector can also print each as it happens
// (--verbose).
//
// Every part of sandbox-run that refuses something on the command's behalf
// (the egress proxy, the transparent netstack, the resolver, the socket and
// port relays) feeds the run's one Collector through Add. The collector
// decides nothing: it only remembers and says.
//
// # Guarantees
//
//   - A refusal is kept once per (kind, host, port, fix): the hundredth
//     refused retry of the same connection is counted, not repeated.
//   - Add, List and Summary are safe for concurrent use; a nil *Collector
//     accepts Add and lists nothing, so a caller without one needs no check.
//   - What Summary and the live lines print is only what was added:
//     nothing is inferred.
//
// # Non-guarantees
//
//   - At most MaxKept distinct refusals are kept; the rest are counted in
//     Dropped. A command that probes thousands of hosts gets the first ones
//     named and the total.
package refusals

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
)

// MaxKept bounds the distinct refusals a Collector keeps.
const MaxKept = 256

// The kinds of a Refusal.
const (
	KindConnect = "connect" // a TCP connection (through the proxy or the netstack)
	KindLookup  = "lookup"  // a name lookup the resolver would not answer
	KindSocket  = "socket"  // a named Unix socket (--unix-socket) refused at set-up
	KindPort    = "port"    // a host port or published port refused at set-up
	KindAgent   = "agent"   // an ssh-agent request the filter refused
)

// Refusal is one thing refused, as people and programs read it.
type Refusal struct {
	// Kind is what was refused: a connection, a name lookup, a socket,
	// a port or an agent request.
	Kind string `json:"kind"`
	// Host is the host name, address or socket path refused; Port is its
	// port, 0 when it has none.
	Host string `json:"host"`
	Port int    `json:"port,omitempty"`
	// Reason is a stable code (the proxy's X-Sandbox-Refusal codes, or the
	// caller's own); Why says it for people.
	Reason string `json:"reason"`
	Why    string `json:"why,omitempty"`
	// Fix is the exact flag that would allow it, such as
	// "--allow-host example.com:443"; "" when no flag can (a metadata
	// address, a refused agent request).
	Fix string `json:"fix,omitempty"`
	// Count is how many times it was refused.
	Count int `json:"count"`
}

// Target is Host and Port as one string: host:port, or Host alone
// without a port.
func (r Refusal) Target() string {
	if r.Port == 0 {
		return r.Host
	}
	return net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
}

// Line is the refusal in one line for stderr.
func (r Refusal) Line() string {
	s := fmt.Sprintf("refused %s %s (%s)", r.Kind, r.Target(), r.Reason)
	if r.Why != "" {
		s += ": " + r.Why
	}
	if r.Fix != "" {
		return s + "; to allow it: " + r.Fix
	}
	return s + "; no flag allows it"
}

type key struct {
	kind, host, fix string
	port            int
}

// Collector remembers a run's refusals. The zero value is not usable; New
// makes one.
type Collector struct {
	mu      sync.Mutex
	live    io.Writer
	index   map[key]int
	list    []Refusal
	dropped int
}

// New returns an empty collector. When live is not nil, each refusal's
// first occurrence is also written to it at once, as
// "sandbox-run: " + Line() + "\n".
func New(live io.Writer) *Collector {
	return &Collector{live: live, index: map[key]int{}}
}

// Add records r (its Count is ignored) and reports whether it was the
// first of its kind, host, port and fix.
func (c *Collector) Add(r Refusal) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := key{r.Kind, r.Host, r.Fix, r.Port}
	if i, ok := c.index[k]; ok {
		c.list[i].Count++
		return false
	}
	if len(c.list) >= MaxKept {
		c.dropped++
		return false
	}
	r.Count = 1
	c.index[k] = len(c.list)
	c.list = append(c.list, r)
	if c.live != nil {
		io.WriteString(c.live, "sandbox-run: "+r.Line()+"\n")
	}
	return true
}

// List returns a copy of the refusals kept, in the order first seen.
func (c *Collector) List() []Refusal {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Refusal(nil), c.list...)
}

// Dropped is the number of distinct refusals beyond MaxKept.
func (c *Collector) Dropped() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// Summary writes each refusal of list once, one line each, prefixed
// "sandbox-run: ", with the number of times when more than one; nothing
// when list is empty.
func Summary(w io.Writer, list []Refusal) {
	for _, r := range list {
		times := ""
		if r.Count > 1 {
			times = fmt.Sprintf(" [%d times]", r.Count)
		}
		fmt.Fprintf(w, "sandbox-run: %s%s\n", r.Line(), times)
	}
}
