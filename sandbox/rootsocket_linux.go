package sandbox

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// rootSockets are the socket names whose server grants whoever connects
// control of the host as root: a container engine runs a privileged
// container with / bound in, a VM manager or snapd installs what it is
// told. Matched on the last component; a name in rootSocketDirs only in
// those directories (a rootless podman's socket grants only its user's).
var rootSockets = map[string]string{
	"docker.sock":     "Docker's API",
	"dockershim.sock": "the Kubernetes container runtime interface",
	"containerd.sock": "containerd's API",
	"crio.sock":       "CRI-O's API",
	"buildkitd.sock":  "BuildKit's API",
	"libvirt-sock":    "libvirt's API",
	"snapd.socket":    "snapd's API",
	"private":         "systemd's private API",
}

var rootSocketDirs = map[string][]string{
	"podman.sock": {"/run/podman", "/var/run/podman"},
	"unix.socket": {"/var/lib/lxd", "/var/snap/lxd/common/lxd", "/var/lib/incus"},
	"private":     {"/run/systemd", "/var/run/systemd"},
}

// rootDaemons are the programs that serve such an API, whatever their
// socket is called, when they run as root.
var rootDaemons = []string{"dockerd", "containerd", "podman", "crio", "buildkitd", "libvirtd", "lxd", "incusd", "snapd", "systemd"}

// rootSocketByPath names the API a socket's path says it serves, as
// "serves X", or "".
func rootSocketByPath(path string) string {
	base := filepath.Base(path)
	if dirs, ok := rootSocketDirs[base]; ok {
		for _, d := range dirs {
			if filepath.Dir(path) == d {
				what := rootSockets[base]
				if what == "" {
					what = base + "'s API"
				}
				return "serves " + what + " (by its path)"
			}
		}
		return ""
	}
	if what, ok := rootSockets[base]; ok {
		return "serves " + what + " (by its name " + base + ")"
	}
	return ""
}

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
		auditEvent(l.audit, l.runID, l.event, f)
	}
	return c, err
}
