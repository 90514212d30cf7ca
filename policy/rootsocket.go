package policy

import "path/filepath"

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

// RootSocket names the API a socket's path says it serves, as "serves
// X", when that API grants whoever connects control of the host as root;
// "" otherwise. It judges the path only: the run also asks the kernel
// who listens.
func RootSocket(path string) string {
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
