package connbroker

import (
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Ports is a range of local ports to bind brokered sockets to.
type Ports struct{ lo, hi int }

// LocalPorts is the kernel's ephemeral range, read once by the caller
// (32768 to 60999 if unreadable).
func LocalPorts() Ports {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			lo, err1 := strconv.Atoi(f[0])
			hi, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && 0 < lo && lo <= hi && hi < 65536 {
				return Ports{lo, hi}
			}
		}
	}
	return Ports{32768, 60999}
}

// Bind binds a socket that is about to connect (a net.Dialer's Control,
// given its network, "tcp4" or "tcp6") to a port of the range chosen
// here rather than by connect. A port bound explicitly stays with its
// socket after the connection ends (the kernel's SOCK_BINDPORT_LOCK), so
// a brokered socket cannot then be bound to a host port of the command's
// choosing.
func (r Ports) Bind(network string, c syscall.RawConn) error {
	if r.lo == 0 {
		r = Ports{32768, 60999}
	}
	var berr error
	err := c.Control(func(fd uintptr) {
		for range 32 {
			port := r.lo + rand.IntN(r.hi-r.lo+1)
			var sa unix.Sockaddr = &unix.SockaddrInet4{Port: port}
			if network == "tcp6" {
				sa = &unix.SockaddrInet6{Port: port}
			}
			if berr = unix.Bind(int(fd), sa); !errors.Is(berr, unix.EADDRINUSE) {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return berr
}
