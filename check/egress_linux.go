package check

import (
	"os"

	"golang.org/x/sys/unix"
)

// egressItem says which mechanisms give a run with an allow-list
// transparent egress (any TCP client, no proxy variables, judged like the
// proxy's) here, and which lose it and why.
func egressItem() Item {
	it := Item{ID: "egress/transparent", Category: "network", Status: StatusOK,
		Details: []string{
			"gvisor: on, as root and unprivileged: sandbox-run's init makes a TUN device inside gVisor's own netstack (CAP_NET_ADMIN for init alone, dropped before the command starts) and relays its packets to the host's netstack, which judges each connection like bwrap's",
			"landlock: lost: no network namespace; TCP connect is confined to the proxy's port (Landlock ABI 4 and later), so only tools that use the HTTP proxy variables get out",
		}}
	switch {
	case os.Geteuid() != 0:
		it.Status = StatusWarn
		it.Summary = "transparent egress: off for bwrap here (not root): a tool that ignores the HTTP proxy variables (ssh, git over SSH, a database client) cannot connect"
		it.Remediation = "run sandbox-run as root (making the sandbox's TUN device from outside needs CAP_SYS_ADMIN in the host's user namespace), or use --sandbox gvisor, which has it unprivileged"
	case unix.Access("/dev/net/tun", unix.R_OK|unix.W_OK) != nil:
		it.Status = StatusWarn
		it.Summary = "transparent egress: off: /dev/net/tun is missing or not usable, so a run with --allow-host fails to set up"
		it.Remediation = "modprobe tun (or make /dev/net/tun: mknod /dev/net/tun c 10 200)"
	default:
		it.Summary = "transparent egress: on for bwrap and gvisor: with --allow-host, any TCP connection goes out through a TUN device and the host side's netstack, judged by the exact address like the proxy's; names resolve only through sandbox-run's resolver"
	}
	return it
}
