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

// BindPort binds a socket that is about to connect (a net.Dialer's
// Control, given its network, "tcp4" or "tcp6") to a port of the local
// range chosen here rather than by connect. A port bound explicitly
// stays with its socket after the connection ends (the kernel's
// SOCK_BINDPORT_LOCK), so a brokered socket cannot then be bound to a
// host port of the command's choosing.
func BindPort(network string, c syscall.RawConn) error {
	lo, hi := localPorts()
	var berr error
	err := c.Control(func(fd uintptr) {
		for range 32 {
			port := lo + rand.IntN(hi-lo+1)
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

// localPorts is the kernel's ephemeral range (32768 to 60999 if
// unreadable).
func localPorts() (int, int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			lo, err1 := strconv.Atoi(f[0])
			hi, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && 0 < lo && lo <= hi && hi < 65536 {
				return lo, hi
			}
		}
	}
	return 32768, 60999
}
