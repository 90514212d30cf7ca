package check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/filter"
	"github.com/sandbox-run/sandbox-run/internal/apparmor"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/probe"
	"github.com/sandbox-run/sandbox-run/policy"
)

// environment probes what tier 1 needs on this machine and sets up one
// real sandbox. ready says the self-test can run. The sandbox is tried only
// when bwrap, user namespaces and seccomp all passed: without one of them
// it could only fail, and its failure would hide the cause named above it.
func environment(ctx context.Context, binary string) (items []Item, mechanism string, ready bool) {
	items = append(items, timed(platformItem))
	var info *bwrap.Info
	bw := timed(func() Item {
		var it Item
		it, info = bwrapItem(ctx)
		return it
	})
	items = append(items, bw)
	items = append(items, advisoryItems(info)...)
	userns := timed(func() Item {
		return usernsItem(bwrap.ReadHost("/proc/sys"), func() (bool, error) { return apparmor.ProfileLoaded("/") })
	})
	seccomp := timed(seccompItem)
	items = append(items, userns, seccomp, timed(yamaItem), timed(cgroupItem), timed(userItem))
	items = append(items, protectedPathsItem(), landlockItem(), egressItem())
	if bw.Status == StatusFail || userns.Status == StatusFail || seccomp.Status == StatusFail {
		return items, "none", false
	}
	it := timed(func() Item { return sandboxItem(ctx, binary) })
	items = append(items, it)
	return items, "bwrap", it.Status == StatusOK
}

// platformItem names the OS, architecture and kernel release, the first
// thing a bug report about a refusal needs.
func platformItem() Item {
	var u unix.Utsname
	unix.Uname(&u)
	return Item{ID: "platform", Category: "host", Status: StatusOK,
		Summary: fmt.Sprintf("%s/%s, kernel %s", runtime.GOOS, runtime.GOARCH, unix.ByteSliceToString(u.Release[:]))}
}

// bwrapItem finds bwrap on PATH and reads its features. The item fails when
// no bwrap is usable, and warns when it is setuid. info is what Detect read,
// even when bwrap is too old (its advisories still apply); nil when it could
// not be read at all.
func bwrapItem(ctx context.Context) (it Item, info *bwrap.Info) {
	it = Item{ID: "bwrap", Category: "bwrap"}
	path, err := exec.LookPath("bwrap")
	if err == nil {
		path, err = filepath.Abs(path)
	}
	if err == nil {
		info, err = bwrap.Detect(ctx, path)
	}
	if err == nil {
		err = info.Required()
	}
	if err != nil {
		it.Status, it.Summary = StatusFail, "no usable bubblewrap: "+probe.OneLine(err.Error())
		it.Remediation = "install bubblewrap 0.4.0 or newer (apt-get install -y bubblewrap, dnf install bubblewrap)"
		return it, info
	}
	setuid := "not setuid"
	if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSetuid != 0 {
		setuid = "setuid root"
	}
	it.Status = StatusOK
	it.Summary = fmt.Sprintf("%s %s (%s)", path, info.Version, setuid)
	it.Details = []string{"features: " + features(info.Features)}
	if setuid != "not setuid" {
		it.Status = StatusWarn
		it.Remediation = "use a bwrap that is not setuid (chmod u-s " + path + "): sandbox-run relies on user namespaces, and a setuid bwrap is more attack surface"
	}
	return it, info
}

// advisoryItems turns the known advisories for the detected bwrap into
// warnings; none when info is nil.
func advisoryItems(info *bwrap.Info) []Item {
	if info == nil {
		return nil
	}
	var items []Item
	for _, a := range info.Advisories() {
		items = append(items, Item{ID: "advisory/" + a.ID, Category: "bwrap", Status: StatusWarn, Summary: a.Detail, Remediation: a.Fix})
	}
	return items
}

// seccompItem fails when this machine cannot get sandbox-run's seccomp
// filter: an unsupported architecture, a kernel without seccomp, or a
// filter that does not assemble.
func seccompItem() Item {
	it := Item{ID: "seccomp", Category: "kernel"}
	arch, err := filter.NativeArch()
	status, _ := os.ReadFile("/proc/self/status")
	switch {
	case err != nil:
		it.Status, it.Summary, it.Remediation = StatusFail, "no seccomp filter for this machine: "+err.Error(), "run on x86_64 or aarch64"
	case !bytes.Contains(status, []byte("\nSeccomp:")):
		it.Status, it.Summary, it.Remediation = StatusFail, "the kernel has no seccomp (no Seccomp: line in /proc/self/status)", "boot a kernel with CONFIG_SECCOMP_FILTER=y"
	default:
		prog, err := filter.Assemble(arch, filter.Options{})
		if err != nil {
			it.Status, it.Summary, it.Remediation = StatusFail, "cannot assemble the seccomp filter: "+err.Error(), "report this as a bug in sandbox-run"
			return it
		}
		it.Status = StatusOK
		it.Summary = fmt.Sprintf("seccomp filter for %s, %d rules, %s", arch, len(filter.Rules()), prog.Digest()[:19])
	}
	return it
}

// yamaItem says whether --ptrace can be allowed on this node: only where
// Yama restricts ptrace to descendants or tighter. It warns, never fails:
// without Yama the sandboxes simply never get ptrace.
func yamaItem() Item {
	it := Item{ID: "yama", Category: "kernel"}
	scope, err := filter.YamaPtraceScope()
	if perr := filter.CheckPtrace(scope, err); perr != nil {
		it.Status = StatusWarn
		if errors.Is(err, filter.ErrNoYama) {
			it.Summary = "no Yama LSM: --ptrace is refused on this node (sandboxes never get ptrace here)"
		} else {
			it.Summary = fmt.Sprintf("kernel.yama.ptrace_scope is %d: --ptrace is refused on this node", scope)
		}
		it.Remediation = "only if agents need debuggers: boot with Yama and sysctl -w kernel.yama.ptrace_scope=1"
		return it
	}
	it.Status, it.Summary = StatusOK, fmt.Sprintf("kernel.yama.ptrace_scope = %d: --ptrace may be allowed", scope)
	return it
}

// userItem says which uid the command will run as, so root sees that it
// is never host uid 0.
func userItem() Item {
	if os.Geteuid() == 0 {
		return Item{ID: "user", Category: "host", Status: StatusOK,
			Summary: fmt.Sprintf("running as root: the command runs as uid %d (--user to change), never as host uid 0", policy.DefaultUID)}
	}
	return Item{ID: "user", Category: "host", Status: StatusOK,
		Summary: fmt.Sprintf("running as uid %d: the command runs as uid %d in its own user namespace", os.Getuid(), os.Getuid())}
}

// protectedPathsItem lists the paths held read-only by default. It probes
// nothing, so it is not timed.
func protectedPathsItem() Item {
	return Item{ID: "protected-paths", Category: "policy", Status: StatusOK,
		Summary: fmt.Sprintf("Protected paths: on (%d paths and the config and hooks of every git directory held read-only where they exist; created ones quarantined after the run)", len(policy.DefaultProtected())),
		Details: policy.DefaultProtected()}
}

// usernsItem judges the kernel's user-namespace settings h. loaded says
// whether Ubuntu's bwrap-userns-restrict profile is loaded; it is asked
// only where AppArmor restricts user namespaces.
func usernsItem(h bwrap.Host, loaded func() (bool, error)) Item {
	it := Item{ID: "userns", Category: "kernel",
		Details: []string{
			fmt.Sprintf("user.max_user_namespaces = %s", sysctlText(h.MaxUserNamespaces)),
			fmt.Sprintf("kernel.unprivileged_userns_clone = %s", sysctlText(h.UnprivilegedUsernsClone)),
			fmt.Sprintf("kernel.apparmor_restrict_unprivileged_userns = %s", sysctlText(h.AppArmorRestrictUserns)),
		}}
	var se *bwrap.SetupError
	if err := bwrap.Preflight(h); errors.As(err, &se) {
		it.Status, it.Summary, it.Remediation = StatusFail, se.What+": "+se.Why, se.Fix
		return it
	}
	if h.AppArmorRestrictUserns != 1 {
		it.Status, it.Summary = StatusOK, "unprivileged user namespaces are enabled"
		return it
	}
	// Whether bwrap works under the restriction is what the sandbox item
	// shows; this one says whether Ubuntu's profile for it is in force.
	switch ok, err := loaded(); {
	case err == nil && ok:
		it.Status = StatusOK
		it.Summary = "Ubuntu's AppArmor restriction on unprivileged user namespaces is on, and its bwrap-userns-restrict profile is loaded (bwrap and unpriv_bwrap in enforce mode)"
	case err != nil:
		it.Status = StatusWarn
		it.Summary = "Ubuntu's AppArmor restriction on unprivileged user namespaces is on: bwrap needs Ubuntu's own profile; whether it is loaded could not be read (" + probe.OneLine(err.Error()) + ")"
		it.Remediation = bwrap.AppArmorFix
	default:
		it.Status = StatusWarn
		it.Summary = "Ubuntu's AppArmor restriction on unprivileged user namespaces is on and Ubuntu's bwrap-userns-restrict profile is not loaded: unless another profile lets bwrap create user namespaces, it cannot (the sandbox check shows which)"
		it.Remediation = bwrap.AppArmorFix
	}
	return it
}

func sysctlText(v int) string {
	if v < 0 {
		return "absent"
	}
	return fmt.Sprint(v)
}

func features(f bwrap.Features) string {
	var on []string
	for name, ok := range map[string]bool{"args": f.Args, "clearenv": f.ClearEnv, "disable-userns": f.DisableUserns,
		"bind-fd": f.BindFD, "info-fd": f.InfoFD, "as-pid-1": f.AsPid1, "size": f.Size, "perms": f.Perms,
		"unshare-cgroup-try": f.UnshareCgroupTry, "seccomp": f.Seccomp} {
		if ok {
			on = append(on, "--"+name)
		}
	}
	sort.Strings(on)
	return strings.Join(on, " ")
}

// cgroupItem reports cgroup v2 and whether this user's cgroup is delegated
// (writable), which resource limits will need.
func cgroupItem() Item {
	it := Item{ID: "cgroup", Category: "kernel"}
	nproc := "no: before Linux 5.14 it counts the uid's processes host-wide, so pids are sampled"
	if limits.NProcPerUserNS() {
		nproc = "yes (Linux 5.14+)"
	}
	// What NewPlan will choose; each run's report names the method it used.
	how := []string{
		"pids (default ceiling " + fmt.Sprint(policy.DefaultPids) + "): cgroup pids.max where a delegated cgroup v2 has the pids controller, else RLIMIT_NPROC set inside the sandbox's user namespace (counted per namespace here: " + nproc + ")",
		"memory: cgroup memory.max where the memory controller is delegated, else sampled from /proc with a per-process RLIMIT_DATA backstop",
		"cpu_time: RLIMIT_CPU per process, and the sandbox's total from its cgroup's cpu.stat where a cgroup v2 can be created, else sampled",
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		it.Status, it.Summary = StatusWarn, "no cgroup v2 at /sys/fs/cgroup: memory is sampled (can overshoot between samples), not held by the kernel"
		it.Remediation = "boot with the unified hierarchy (systemd.unified_cgroup_hierarchy=1)"
		it.Details = how
		return it
	}
	own := ""
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(l, "0::"); ok {
				own = p
			}
		}
	}
	dir := filepath.Join("/sys/fs/cgroup", own)
	delegated := unix.Access(dir, unix.W_OK) == nil
	it.Status = StatusOK
	it.Summary = fmt.Sprintf("cgroup v2; this process's cgroup %s is %s", own, map[bool]string{true: "writable (delegated)", false: "not writable (not delegated)"}[delegated])
	it.Details = how
	return it
}

// sandboxItem sets up one real sandbox with the binary under test and
// checks what init read back from inside.
func sandboxItem(ctx context.Context, binary string) Item {
	it := Item{ID: "sandbox", Category: "sandbox"}
	fail := func(summary, fix string) Item {
		it.Status, it.Summary, it.Remediation = StatusFail, summary, fix
		return it
	}
	r, summary, fix := sandboxReport(ctx, binary, "a sandbox")
	if r == nil {
		return fail(summary, fix)
	}
	rb := r.Readback
	var problems []string
	switch {
	case r.Tier != 1 || r.Mechanism != "bwrap":
		problems = append(problems, fmt.Sprintf("tier %d mechanism %s", r.Tier, r.Mechanism))
	case rb == nil:
		problems = append(problems, "nothing was read back from inside")
	default:
		if rb.NoNewPrivs != 1 {
			problems = append(problems, "NoNewPrivs is not 1")
		}
		if rb.Seccomp != 2 {
			problems = append(problems, fmt.Sprintf("Seccomp mode is %d, not 2 (filter)", rb.Seccomp))
		}
		if strings.Trim(rb.CapEff, "0") != "" {
			problems = append(problems, "capabilities held: CapEff "+rb.CapEff)
		}
		for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts"} {
			host, _ := os.Readlink("/proc/self/ns/" + ns)
			if in := rb.Namespaces[ns]; in == "" || in == host {
				problems = append(problems, ns+" namespace is the host's")
			}
		}
		if os.Geteuid() == 0 && r.HostUID == 0 {
			problems = append(problems, "the command ran as host uid 0")
		}
	}
	if len(problems) > 0 {
		return fail("the sandbox is not what tier 1 needs: "+strings.Join(problems, "; "), "report this as a bug in sandbox-run with the output of check --json")
	}
	it.Status = StatusOK
	it.Summary = fmt.Sprintf("tier 1 sandbox set up and read back from inside: uid %d, NoNewPrivs 1, Seccomp 2, CapEff 0, own namespaces", rb.UID)
	it.Details = []string{"seccomp " + r.Seccomp.Digest, "namespaces " + strings.Join(r.Namespaces, ", ")}
	return it
}
