package hostnet

import (
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/audit"
	"golang.org/x/sys/unix"
)

// rootDaemons are the programs that serve such an API, whatever their
// socket is called, when they run as root.
var rootDaemons = []string{"dockerd", "containerd", "podman", "crio", "buildkitd", "libvirtd", "lxd", "incusd", "snapd", "systemd"}

// rootSocketByPeer connects to target and asks the kernel who listens
// (SO_PEERCRED: the credentials of the process that called listen): a
// root process that is one of rootDaemons grants root. "" when it is
// not, or when that cannot be read (then only the path has spoken).
func rootSocketByPeer(target string) string {
	c, err := net.DialTimeout("unix", target, 2*time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return ""
	}
	var cred *unix.Ucred
	_ = raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || cred == nil || cred.Uid != 0 || cred.Pid <= 0 {
		return ""
	}
	comm := readComm(int(cred.Pid))
	for _, d := range rootDaemons {
		if comm == d {
			return "is served by " + comm + " (pid " + strconv.Itoa(int(cred.Pid)) + ") running as root"
		}
	}
	return ""
}

func readComm(pid int) string {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 64))
	return strings.TrimSpace(string(b))
}

// auditListener writes one audit event per accepted connection.
type auditListener struct {
	net.Listener
	audit  io.Writer
	runID  string
	event  string
	fields map[string]any
}

func (l *auditListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		f := map[string]any{"decision": "allow"}
		for k, v := range l.fields {
			f[k] = v
		}
		audit.Event(l.audit, l.runID, l.event, f)
	}
	return c, err
}
