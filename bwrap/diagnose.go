package bwrap

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/fault"
)

// ErrSetup marks a sandbox that could not be set up. Callers exit 125.
// It is fault.ErrSetup, the sentinel of every refusal.
var ErrSetup = fault.ErrSetup

// SetupError says what failed, why, and how to fix it, in one line: it is
// sandbox-run's one such type (internal/fault.Error), the same as
// sandbox.SetupError.
type SetupError = fault.Error

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
	// ProcCovered lists the mount points below /proc in the caller's
	// mount namespace (from mountinfo next to procSys), joined by ", ",
	// "" when there are none. A container runtime's masked and read-only
	// paths (podman's /proc/kcore, /proc/acpi, /proc/sys, ...) are such
	// mounts, and while any hides part of /proc the kernel refuses a new
	// proc mount in a user namespace, which bwrap needs. binfmt_misc on
	// /proc/sys/fs/binfmt_misc is left out: it sits on a permanently
	// empty directory, which the kernel does not count.
	ProcCovered string
}

// ReadHost reads Host from a /proc/sys tree (normally "/proc/sys"; tests
// pass a directory of their own making).
func ReadHost(procSys string) Host {
	h := ReadSysctls(procSys)
	h.AppArmorRestrictUserns = readSysctl(procSys, "kernel/apparmor_restrict_unprivileged_userns")
	h.Seccomp = seccompMode(filepath.Join(filepath.Dir(procSys), "self", "status"))
	h.ProcCovered = procCovered(filepath.Join(filepath.Dir(procSys), "self", "mountinfo"))
	return h
}

// ReadSysctls reads only the two sysctls Preflight looks at from a
// /proc/sys tree; AppArmorRestrictUserns and Seccomp are -1 (not read)
// and ProcCovered "". Use it before bwrap runs and ReadHost once bwrap
// has failed: the other fields serve only Diagnose, and a run that
// succeeds need not read them.
func ReadSysctls(procSys string) Host {
	return Host{
		MaxUserNamespaces:       readSysctl(procSys, "user/max_user_namespaces"),
		UnprivilegedUsernsClone: readSysctl(procSys, "kernel/unprivileged_userns_clone"),
		AppArmorRestrictUserns:  -1,
		Seccomp:                 -1,
	}
}

// readSysctl reads the integer sysctl rel below procSys; -1 when it is
// missing or not an integer.
func readSysctl(procSys, rel string) int {
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

// procCovered reads a mountinfo file and returns the mount points below
// /proc, except binfmt_misc's, joined by ", " ("" when none or unreadable).
func procCovered(mountinfo string) string {
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		return ""
	}
	var covered []string
	for _, l := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options ... - fstype source ...
		f := strings.Fields(l)
		if len(f) < 5 || !strings.HasPrefix(f[4], "/proc/") || strings.Contains(l, " - binfmt_misc ") {
			continue
		}
		covered = append(covered, f[4])
	}
	return strings.Join(covered, ", ")
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
	// In this order: the first that recognises msg names the cause.
	for _, diagnose := range []func(string, Host) *SetupError{usernsRefused, containerRefused, namespacesRefused, mountFailed} {
		if e := diagnose(msg, h); e != nil {
			return e
		}
	}
	if msg == "" {
		return &SetupError{
			What: "bwrap failed before the command started",
			Why:  fmt.Sprintf("it exited with status %d and printed nothing", exitCode),
			Fix:  "run the same command with --dry-run and try the printed bwrap call by hand",
		}
	}
	return &SetupError{
		What: "bwrap failed before the command started",
		Why:  fmt.Sprintf("bwrap said %q", msg),
		Fix:  "run the same command with --dry-run and try the printed bwrap call by hand",
	}
}

// usernsRefused recognises a user namespace that bwrap made but could not
// set up: Ubuntu's AppArmor restriction, or another security module.
func usernsRefused(msg string, h Host) *SetupError {
	appArmor := h.AppArmorRestrictUserns == 1
	if !(strings.Contains(msg, "setting up uid map") && strings.Contains(msg, "Permission denied") ||
		strings.Contains(msg, "Failed RTM_NEWADDR") ||
		strings.Contains(msg, "loopback: Failed") && appArmor) {
		return nil
	}
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
}

// containerRefused recognises bwrap refused by the container sandbox-run
// itself runs in: its seccomp profile or its masked /proc paths.
func containerRefused(msg string, h Host) *SetupError {
	switch {
	case strings.Contains(msg, "Can't set hostname") && strings.Contains(msg, "Operation not permitted") && h.Seccomp == 2:
		// bwrap created its namespaces, then sethostname in its own UTS
		// namespace was refused: podman's and docker's default seccomp
		// profiles allow sethostname only with CAP_SYS_ADMIN.
		return &SetupError{
			What: "bwrap could not set the sandbox's hostname",
			Why: fmt.Sprintf("sandbox-run itself runs under a seccomp filter (Seccomp: 2 in /proc/self/status), as in a container "+
				"started with its runtime's default seccomp profile, which refuses sethostname without CAP_SYS_ADMIN (bwrap said %q)", msg),
			Fix: containerFix(h),
		}
	case strings.Contains(msg, "Can't mount proc") && strings.Contains(msg, "Operation not permitted") && h.ProcCovered != "":
		return &SetupError{
			What: "bwrap could not mount the sandbox's /proc",
			Why: fmt.Sprintf("mounts cover part of this /proc (%s), as a container runtime's masked paths do, and the kernel "+
				"refuses a new proc mount in a user namespace while part of /proc is hidden (bwrap said %q)", h.ProcCovered, msg),
			Fix: containerFix(h),
		}
	case namespaceFailed(msg) && h.Seccomp == 2 && h.MaxUserNamespaces != 0 && h.UnprivilegedUsernsClone != 0:
		// The kernel allows user namespaces, yet creating one failed, and
		// a seccomp filter holds sandbox-run itself: the filter refused it.
		return &SetupError{
			What: "bwrap could not create namespaces",
			Why: fmt.Sprintf("sandbox-run itself runs under a seccomp filter (Seccomp: 2 in /proc/self/status), as in a container "+
				"started with its runtime's default seccomp profile, which refuses namespace creation without CAP_SYS_ADMIN (bwrap said %q)", msg),
			Fix: containerFix(h),
		}
	}
	return nil
}

func namespaceFailed(msg string) bool {
	return strings.Contains(msg, "Creating new namespace failed") || strings.Contains(msg, "No permissions to creat")
}

// namespacesRefused recognises the kernel refusing namespaces outright.
func namespacesRefused(msg string, h Host) *SetupError {
	if !namespaceFailed(msg) {
		return nil
	}
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
}

// mountFailed recognises a mount whose source or target bwrap could not
// reach.
func mountFailed(msg string, _ Host) *SetupError {
	if !strings.Contains(msg, "Can't find source path") && !strings.Contains(msg, "Can't mkdir") && !strings.Contains(msg, "Can't create file at") {
		return nil
	}
	return &SetupError{
		What: "bwrap could not make a mount",
		Why:  fmt.Sprintf("bwrap said %q", msg),
		Fix:  "make sure every --workdir, --write and --read path exists and is reachable by the sandbox's user",
	}
}

// containerFix names the runtime flags that let bwrap run inside a
// container, as proved against Debian's podman (e2e/podman_kernel_linux_
// test.go): the seccomp profile must allow namespace creation and
// sethostname, and, when mounts cover part of /proc, the masked paths must
// go too, since seccomp alone then fails at bwrap's proc mount.
func containerFix(h Host) string {
	fix := "start the container with --security-opt seccomp=unconfined (or a copy of the runtime's default profile " +
		"that allows unshare, clone with namespace flags and sethostname)"
	if h.ProcCovered != "" {
		fix += " and --security-opt unmask=ALL (podman; docker: --security-opt systempaths=unconfined), " +
			"as the container's masked /proc paths also stop bwrap's proc mount"
	}
	return fix + "; --privileged does both but gives the container far more, as would --cap-add SYS_ADMIN in place of " +
		"the seccomp option; or run sandbox-run outside the container" + LandlockFix
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
