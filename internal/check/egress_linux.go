package check

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// egressItem says which mechanisms give a run with an allow-list
// transparent egress (any TCP client, no proxy variables, judged like the
// proxy's) here, and which lose it and why. Under bwrap, root or not, it
// needs a /dev/net/tun this caller may open (and the user namespaces
// bwrap needs anyway); where it is lost, a run still starts and names the
// loss.
func egressItem() Item {
	it := Item{ID: "egress/transparent", Category: "network", Status: StatusOK,
		Details: []string{
			"gvisor: on, as root and unprivileged: sandbox-run's init makes a TUN device inside gVisor's own netstack (CAP_NET_ADMIN for init alone, dropped before the command starts) and relays its packets to the host's netstack, which judges each connection like bwrap's",
			"landlock: lost: no network namespace; TCP connect is confined to the proxy's port (Landlock ABI 4 and later), so only tools that use the HTTP proxy variables get out",
		}}
	const lost = ": a run with --allow-host starts with the HTTP proxy alone, and a tool that ignores its variables (ssh, git over SSH, a database client) cannot connect"
	err := unix.Faccessat(unix.AT_FDCWD, "/dev/net/tun", unix.R_OK|unix.W_OK, unix.AT_EACCESS)
	switch {
	case errors.Is(err, unix.ENOENT):
		it.Status = StatusWarn
		it.Summary = "transparent egress: off for bwrap here: no /dev/net/tun" + lost
		it.Remediation = "modprobe tun (or make the device: mknod -m 0666 /dev/net/tun c 10 200), or use --sandbox gvisor, whose TUN device is its own"
	case err != nil:
		it.Status = StatusWarn
		it.Summary = fmt.Sprintf("transparent egress: off for bwrap here: /dev/net/tun is not open to uid %d (%v)", os.Geteuid(), err) + lost
		it.Remediation = "chmod 0666 /dev/net/tun (what udev's default rule does), or use --sandbox gvisor, whose TUN device is its own"
	default:
		it.Summary = "transparent egress: on for bwrap and gvisor: with --allow-host, any TCP connection goes out through a TUN device and the host side's netstack, judged by the exact address like the proxy's; names resolve only through sandbox-run's resolver"
	}
	return it
}
