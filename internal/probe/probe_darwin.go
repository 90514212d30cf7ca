package probe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// markerKey: macOS has no kernel keyrings (the /proc/keys case is n/a).
func markerKey(string) error { return errors.New("macOS has no kernel keyrings") }

// probeOS runs the probes that have a macOS form. The others (user
// namespaces, seccomp, the foreign ABI, /proc, Linux sysctls) are n/a on
// darwin in egress-cases.json, so the runner never asks for them here.
func probeOS(o *probeOut, name string, a []string) int {
	switch name {
	case "raw-socket":
		for _, s := range []struct {
			name           string
			family, typ, p int
		}{
			{"inet-raw-icmp", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP},
			{"inet6-raw-icmpv6", unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6},
		} {
			fd, err := unix.Socket(s.family, s.typ, s.p)
			if err == nil {
				unix.Close(fd)
			}
			o.sub(s.name, err == nil, "socket: "+ErrText(err))
		}
		// The packet filter devices are macOS's AF_PACKET.
		var err error
		for i := 0; i < 8; i++ {
			var f *os.File
			if f, err = os.OpenFile("/dev/bpf"+strconv.Itoa(i), os.O_RDWR, 0); err == nil {
				f.Close()
				break
			}
			if !errors.Is(err, unix.EBUSY) {
				break
			}
		}
		o.sub("bpf-device", err == nil, "open /dev/bpfN: "+ErrText(err))
		return o.verdict("no raw socket or packet filter opened")
	case "proc-signal": // PID TAG: no PID namespace, so the pid is the marker's
		if len(a) < 2 {
			return 2
		}
		pid, err := strconv.Atoi(a[0])
		if err != nil {
			return 2
		}
		err = unix.Kill(pid, unix.SIGCONT) // harmless to the marker
		o.sub("kill", err == nil, "kill(SIGCONT): "+ErrText(err))
		return o.verdict("the marker is out of reach")
	case "proc-environ": // PID SECRET: macOS's /proc/PID/environ is kern.procargs2
		if len(a) < 2 {
			return 2
		}
		b, ok := procArgs(a[0])
		switch {
		case !ok:
			o.sub("procargs2", false, "sysctl kern.procargs2 of pid "+a[0]+" refused or empty")
		default:
			o.sub("procargs2", bytes.Contains(b, []byte(a[1])), readDetail(b, nil, a[1]))
		}
		return o.verdict("the marker's environment is out of reach")
	case "tty-inject":
		// TIOCSTI takes a char*: the low byte of the int32 on both
		// little-endian Mac architectures.
		err := unix.IoctlSetPointerInt(0, unix.TIOCSTI, '#')
		o.sub("TIOCSTI", err == nil, "ioctl(0, TIOCSTI): "+ErrText(err))
		return o.verdict("no keystroke pushed")
	}
	fmt.Fprintf(os.Stderr, "__probe %s: no such probe on macOS (egress-cases.json marks its cases n/a here)\n", name)
	return 2
}

// procArgs returns kern.procargs2 of pid without its leading argc, with a
// NUL in front so that the first string is NUL-delimited too.
func procArgs(pid string) ([]byte, bool) {
	n, err := strconv.Atoi(pid)
	if err != nil {
		return nil, false
	}
	b, err := unix.SysctlRaw("kern.procargs2", n)
	if err != nil || len(b) < 4 {
		return nil, false
	}
	return append([]byte{0}, b[4:]...), true
}
