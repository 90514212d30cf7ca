//go:build linux

package proxy

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openAddrEvents opens a netlink route socket subscribed to the address
// and link events of the calling thread's network namespace
// (RTMGRP_IPV4_IFADDR, RTMGRP_IPV6_IFADDR, RTMGRP_LINK). The kernel
// queues such an event on the socket before the system call that made
// the change returns.
func openAddrEvents() (*os.File, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK,
		Groups: unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR | unix.RTMGRP_LINK}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "netlink-route-addr-events"), nil
}

// drainAddrEvents reads every queued event without waiting. It reports
// true when there was one, or when the socket could not be read (ENOBUFS:
// the queue overflowed and events were lost), so that the caller lists
// the addresses again; false only when the queue was empty.
func drainAddrEvents(f *os.File, buf []byte) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	changed := false
	err = rc.Read(func(fd uintptr) bool {
		for range 1 << 16 { // bounded: a flood is one change, and the next call drains the rest
			_, _, e := unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
			switch {
			case e == nil, errors.Is(e, syscall.EINTR):
				changed = changed || e == nil
				continue
			case errors.Is(e, syscall.EAGAIN):
				return true
			}
			changed = true // ENOBUFS or anything else
			return true
		}
		changed = true
		return true
	})
	return changed || err != nil
}
