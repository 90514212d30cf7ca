package bwrap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrSetup marks a sandbox that could not be set up. Callers exit 125.
var ErrSetup = errors.New("sandbox setup failed")

// SetupError says what failed, why, and how to fix it, in one line.
type SetupError struct {
	What string
	Why  string
	Fix  string
}

func (e *SetupError) Error() string {
	s := e.What
	if e.Why != "" {
		s += ": " + e.Why
	}
	if e.Fix != "" {
		s += "; fix: " + e.Fix
	}
	return strings.ReplaceAll(s, "\n", " ")
}

// Is matches ErrSetup.
func (e *SetupError) Is(target error) bool { return target == ErrSetup }

// Host holds the kernel settings that decide whether bwrap can create its
// namespaces. -1 means the setting does not exist on this kernel.
type Host struct {
	MaxUserNamespaces       int // user.max_user_namespaces
	UnprivilegedUsernsClone int // kernel.unprivileged_userns_clone (Debian/Ubuntu patch)
	AppArmorRestrictUserns  int // kernel.apparmor_restrict_unprivileged_userns (Ubuntu 23.10+)
	// Seccomp is the Seccomp: field of the caller's own /proc/self/status
	// (0 none, 2 a filter), read from the proc tree procSys lies in; 2
	// means sandbox-run itself runs under a system-call filter, as in a
	// container started with its runtime's default seccomp profile.
	Seccomp int
}

// ReadHost reads Host from a /proc/sys tree (normally "/proc/sys"; tests
// pass a directory of their own making).
func ReadHost(procSys string) Host {
	read := func(rel string) int {
		b, err := os.ReadFile(filepath.Join(procSys, rel))
		if err != nil {
			return -1
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return -1
		}
		return v
	}
	return Host{
		MaxUserNamespaces:       read("user/max_user_namespaces"),
		UnprivilegedUsernsClone: read("kernel/unprivileged_userns_clone"),
		AppArmorRestrictUserns:  read("kernel/apparmor_restrict_unprivileged_userns"),
		Seccomp:                 seccompMode(filepath.Join(filepath.Dir(procSys), "self", "status")),
	}
}

// seccompMode reads the Seccomp: field of a /proc/PID/status file, -1 if
// there is none.
func seccompMode(status string) int {
	b, err := os.ReadFile(status)
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Seccomp:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return -1
}

// Preflight refuses, before bwrap runs, a host whose settings rule out
// unprivileged user namespaces. The sandbox always starts bwrap without
// privileges (as root it drops to an unprivileged uid first), so these
// settings apply to root too.
func Preflight(h Host) error {
	if h.MaxUserNamespaces == 0 {
		return &SetupError{
			What: "user namespaces are disabled",
			Why:  "user.max_user_namespaces is 0, so bwrap cannot create the sandbox's user namespace",
			Fix:  "sysctl -w user.max_user_namespaces=15000 (and persist it in /etc/sysctl.d/)" + LandlockFix,
		}
	}
	if h.UnprivilegedUsernsClone == 0 {
		return &SetupError{
			What: "unprivileged user namespaces are disabled",
			Why:  "kernel.unprivileged_userns_clone is 0",
			Fix:  "sysctl -w kernel.unprivileged_userns_clone=1 (and persist it in /etc/sysctl.d/)" + LandlockFix,
		}
	}
	return nil
}

// Diagnose turns bwrap's own error output (it failed before the command
// started) into a SetupError naming the cause and the fix.
func Diagnose(stderr string, exitCode int, h Host) error {
	msg := bwrapLine(stderr)
	appArmor := h.AppArmorRestrictUserns == 1
	switch {
	case strings.Contains(msg, "setting up uid map") && strings.Contains(msg, "Permission denied"),
		strings.Contains(msg, "Failed RTM_NEWADDR"),
		strings.Contains(msg, "loopback: Failed") && appArmor:
		if appArmor {
			return &SetupError{
				What: "bwrap could not set up its user namespace",
				Why:  fmt.Sprintf("Ubuntu's AppArmor restriction on unprivileged user namespaces is on (kernel.apparmor_restrict_unprivileged_userns=1) and bwrap has no profile allowing them (bwrap said %q)", msg),
				Fix:  AppArmorFix + LandlockFix,
			}
		}
		return &SetupError{
			What: "bwrap could not set up its user namespace",
			Why:  fmt.Sprintf("the kernel or a security module refused it (bwrap said %q)", msg),
			Fix:  "allow unprivileged user namespaces for bwrap (check user.max_user_namespaces, kernel.unprivileged_userns_clone and any AppArmor/SELinux policy)" + LandlockFix,
		}
	case (strings.Contains(msg, "Creating new namespace failed") || strings.Contains(msg, "No permissions to creat")) &&
		h.Seccomp == 2 && h.MaxUserNamespaces != 0 && h.UnprivilegedUsernsClone != 0:
		// The kernel allows user namespaces, yet creating one failed, and
		// a seccomp filter holds sandbox-run itself: the filter refused it.
		return &SetupError{
			What: "bwrap could not create namespaces",
			Why: fmt.Sprintf("sandbox-run itself runs under a seccomp filter (Seccomp: 2 in /proc/self/status), as in a container "+
				"started with its runtime's default seccomp profile, which refuses namespace creation without CAP_SYS_ADMIN (bwrap said %q)", msg),
			Fix: "start the container with a seccomp profile that allows unshare and clone with namespace flags " +
				"(podman or docker: --security-opt seccomp=unconfined, or a copy of the default profile that allows them); " +
				"--cap-add SYS_ADMIN lifts it too but gives the container far more; or run sandbox-run outside the container",
		}
	case strings.Contains(msg, "Creating new namespace failed"), strings.Contains(msg, "No permissions to creat"):
		why := fmt.Sprintf("bwrap said %q", msg)
		if h.MaxUserNamespaces == 0 {
			why = "user.max_user_namespaces is 0; " + why
		}
		if h.UnprivilegedUsernsClone == 0 {
			why = "kernel.unprivileged_userns_clone is 0; " + why
		}
		return &SetupError{
			What: "bwrap could not create namespaces",
			Why:  why,
			Fix:  "enable unprivileged user namespaces (sysctl -w user.max_user_namespaces=15000; on Debian/Ubuntu also kernel.unprivileged_userns_clone=1)" + LandlockFix,
		}
	case strings.Contains(msg, "Can't find source path"), strings.Contains(msg, "Can't mkdir"), strings.Contains(msg, "Can't create file at"):
		return &SetupError{
			What: "bwrap could not make a mount",
			Why:  fmt.Sprintf("bwrap said %q", msg),
			Fix:  "make sure every --workdir, --write and --read path exists and is reachable by the sandbox's user",
		}
	case msg == "":
		return &SetupError{
			What: "bwrap failed before the command started",
			Why:  fmt.Sprintf("it exited with status %d and printed nothing", exitCode),
			Fix:  "run the same command with --dry-run and try the printed bwrap call by hand",
		}
	default:
		return &SetupError{
			What: "bwrap failed before the command started",
			Why:  fmt.Sprintf("bwrap said %q", msg),
			Fix:  "run the same command with --dry-run and try the printed bwrap call by hand",
		}
	}
}

// bwrapLine picks bwrap's own message out of its output.
func bwrapLine(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "bwrap: ") {
			return strings.TrimPrefix(l, "bwrap: ")
		}
	}
	return firstLine(stderr)
}

// AppArmorFix is the fix for Ubuntu's AppArmor restriction on user
// namespaces (kernel.apparmor_restrict_unprivileged_userns=1): sandbox-run
// setup, which loads Ubuntu's own profile for bwrap, never an unconfined
// one, and refuses on other distributions.
const AppArmorFix = "as root, sandbox-run setup: it installs and loads Ubuntu's own bwrap-userns-restrict AppArmor profile (never an unconfined one; sandbox-run setup --dry-run shows every file and command first)"

// LandlockFix is the second fix every user-namespace refusal offers: the
// landlock mechanism needs no namespace, and is never chosen on its own
// because of what it loses.
const LandlockFix = "; or, without namespaces, run --sandbox landlock (Landlock and seccomp; it loses the PID and network namespaces: the command sees the host's processes, and a server on the proxy's port at any address is reachable; sandbox-run check lists every loss)"
