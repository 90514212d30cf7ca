package tun

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
)

// Config is the device to make.
type Config struct {
	Name  string       // interface name, such as "tun0"
	Addr  netip.Prefix // the sandbox's address on it, such as 10.0.2.15/24 (IPv4)
	MTU   int
	Route bool // a default route through the device
	// VnetHdr makes the device with IFF_VNET_HDR: every packet read or
	// written carries a virtio_net_hdr first (the reader of the
	// descriptor asks for offloads with TUNSETOFFLOAD).
	VnetHdr bool
}

// HelperArg is the hidden first argument of the network namespace helper
// (HelperMain): the process a launcher starts in a user and network
// namespace of its own, which makes the TUN device there, hands its
// descriptor to the launcher and then becomes bwrap.
const HelperArg = "__sandbox-netns"

// Helper is what the launcher asks of the helper.
type Helper struct {
	// Sock is the helper's descriptor of its end of a SOCK_SEQPACKET
	// Unix socket whose other end the launcher reads (Receive).
	Sock int
	// UID and GID are the ids the helper takes before it executes Argv
	// (its own, unless the launcher is root).
	UID, GID int
	// SetGroups clears the supplementary groups too (the launcher is
	// root, and the namespace allows setgroups).
	SetGroups bool
	Device    Config
	// Inotify, when its counts are not zero, is the inotify ceiling the
	// helper sets in its user namespace (user.max_inotify_instances and
	// user.max_inotify_watches) before it becomes bwrap. The kernel
	// checks a namespace's ceiling for everything below it, so it holds
	// in the sandbox's namespace, which bwrap nests in the helper's, from
	// the sandbox's first instruction; nothing in the sandbox holds a
	// capability in the helper's namespace to raise it.
	Inotify Inotify
	Argv    []string // bwrap's command line, executed with an empty environment
}

// Inotify is an inotify ceiling: instances and watches.
type Inotify struct{ Instances, Watches int64 }

// Args is h as the helper's command line: HelperArg and h's fields, then
// "--" and Argv.
func (h Helper) Args() []string {
	g := "0"
	if h.SetGroups {
		g = "1"
	}
	a := []string{HelperArg, strconv.Itoa(h.Sock), strconv.Itoa(h.UID), strconv.Itoa(h.GID), g,
		h.Device.Name, h.Device.Addr.String(), strconv.Itoa(h.Device.MTU), strconv.FormatBool(h.Device.Route), strconv.FormatBool(h.Device.VnetHdr),
		strconv.FormatInt(h.Inotify.Instances, 10), strconv.FormatInt(h.Inotify.Watches, 10), "--"}
	return append(a, h.Argv...)
}

// parseHelper reads Args' arguments back (those after HelperArg).
func parseHelper(args []string) (Helper, error) {
	var h Helper
	if len(args) < 13 || args[11] != "--" {
		return h, errors.New("usage: SOCK UID GID SETGROUPS NAME ADDR MTU ROUTE VNETHDR INOTIFY-INSTANCES INOTIFY-WATCHES -- ARGV")
	}
	var ceiling [2]int64
	for i, s := range args[9:11] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return h, fmt.Errorf("bad number %q", s)
		}
		ceiling[i] = n
	}
	ints := make([]int, 4)
	for i, s := range []string{args[0], args[1], args[2], args[6]} {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return h, fmt.Errorf("bad number %q", s)
		}
		ints[i] = n
	}
	addr, err := netip.ParsePrefix(args[5])
	if err != nil {
		return h, err
	}
	route, err := strconv.ParseBool(args[7])
	if err != nil {
		return h, err
	}
	vnet, err := strconv.ParseBool(args[8])
	if err != nil {
		return h, err
	}
	h = Helper{Sock: ints[0], UID: ints[1], GID: ints[2], SetGroups: args[3] == "1",
		Device:  Config{Name: args[4], Addr: addr, MTU: ints[3], Route: route, VnetHdr: vnet},
		Inotify: Inotify{Instances: ceiling[0], Watches: ceiling[1]}, Argv: args[12:]}
	return h, nil
}

// LostError is the helper's word that it could not make the device (or
// leave its privileges behind); it exited without executing bwrap.
type LostError struct{ Why string }

func (e *LostError) Error() string { return e.Why }
