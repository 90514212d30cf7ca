package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// The tests in this file run sandbox-run in a real container: Debian's
// podman, with its default seccomp profile, capabilities and masked paths,
// on a minimal Debian root filesystem that scripts/container-rootfs.sh
// builds with debootstrap (cached under .cache/rootfs): rootful as root
// (CI's make test), rootless as a user (CI's make test-kernel as sbxci,
// where the sandbox's user namespace nests in the container's). They are
// the real-container counterpart of the fakes in
// container_kernel_linux_test.go and landlock_kernel_linux_test.go.

// podmanTimeout bounds every podman call; a container still there when
// its podman run ends (killed at the timeout) is removed right after, with
// podman rm --force.
const podmanTimeout = 120 * time.Second

// podmanBox runs containers from one rootfs with one runtime.
type podmanBox struct {
	t       *testing.T
	podman  string
	runtime []string // global podman flags choosing the OCI runtime, if not the default
	rootfs  string
	n       int // containers started, for unique names
}

// podmanLimits lowers the container's rlimits below the caller's hard
// limits. Podman raises RLIMIT_NOFILE and RLIMIT_NPROC by default, which
// needs CAP_SYS_RESOURCE of the host; the machine this was written on
// refuses raising a hard limit even to root ("setrlimit RLIMIT_NOFILE:
// Operation not permitted" from the runtime), and lowering changes nothing
// the tests look at.
var podmanLimits = []string{"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=8192:8192"}

// newPodman returns a podmanBox, or skips (a failure under
// SANDBOX_REQUIRE=1) where podman or the rootfs is unavailable. As root it
// is podman's rootful mode, as any other user rootless podman (which needs
// the user's /etc/subuid and /etc/subgid ranges and newuidmap).
func newPodman(t *testing.T) *podmanBox {
	t.Helper()
	podman, err := exec.LookPath("podman")
	if err != nil {
		sandboxtest.Unavailable(t, "podman", "apt-get install -y podman runc debootstrap (make deps)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	c := exec.CommandContext(ctx, "../scripts/container-rootfs.sh")
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		sandboxtest.Unavailable(t, "a debootstrap rootfs", fmt.Sprintf("scripts/container-rootfs.sh: %v: %s (as root: make container-rootfs)", err, stderr.String()))
	}
	b := &podmanBox{t: t, podman: podman, rootfs: strings.TrimSpace(string(out))}
	// Podman's default runtime first (crun on Debian); crun refuses a
	// hybrid cgroup hierarchy with any controller on the v2 side ("cgroups
	// in hybrid mode not supported"), which runc accepts.
	var why []string
	for _, rt := range [][]string{nil, {"--runtime", "runc"}} {
		b.runtime = rt
		r := b.run(nil, "true")
		if r.code == 0 {
			t.Logf("podman runtime: %v (rootfs %s)", rt, b.rootfs)
			return b
		}
		why = append(why, fmt.Sprintf("runtime %v: exit %d: %s", rt, r.code, strings.TrimSpace(r.stderr)))
	}
	sandboxtest.Unavailable(t, "podman run --rootfs", strings.Join(why, "; ")+
		" (apt-get install -y runc; rootless: uidmap and ranges for "+sandboxtest.CurrentUser()+" in /etc/subuid and /etc/subgid)")
	return nil
}

// run runs args in a new container from b's rootfs with podman's defaults
// plus extra flags, bounded by podmanTimeout, and removes the container.
func (b *podmanBox) run(extra []string, args ...string) result {
	b.t.Helper()
	b.n++
	name := fmt.Sprintf("sbx-test-%d-%d", os.Getpid(), b.n)
	// No network: the tests need none, and it keeps podman's firewall
	// set-up (netavark) out of what can fail.
	// Podman's own warnings (rootless: "/" is not a shared mount) would
	// mix with sandbox-run's one line on stderr.
	a := append([]string{"--log-level", "error"}, b.runtime...)
	a = append(a, "run", "--rm", "--name", name, "--network", "none")
	// A tmpfs /tmp and the XDG directories on it: rootless, the rootfs
	// (root's) cannot be written, not even through its overlay, and
	// sandbox-run keeps its cache and state under $HOME (/root).
	a = append(a, "--tmpfs", "/tmp", "--env", "XDG_CACHE_HOME=/tmp/cache", "--env", "XDG_STATE_HOME=/tmp/state",
		"--env", "XDG_CONFIG_HOME=/tmp/config")
	a = append(append(append(a, podmanLimits...), extra...), "--rootfs", b.rootfs+":O")
	ctx, cancel := context.WithTimeout(context.Background(), podmanTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, b.podman, append(a, args...)...)
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	err := c.Run()
	// --rm removes the container when podman ends normally; after a
	// timeout podman was killed and the container may remain.
	rm, rmCancel := context.WithTimeout(context.Background(), podmanTimeout)
	defer rmCancel()
	if out, rmErr := exec.CommandContext(rm, b.podman, "rm", "--force", "--ignore", "--time", "0", name).CombinedOutput(); rmErr != nil {
		b.t.Errorf("podman rm %s: %v: %s", name, rmErr, out)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		b.t.Fatalf("podman: %v", err)
	}
	if ctx.Err() != nil {
		b.t.Fatalf("podman %v: no result in %v", args, podmanTimeout)
	}
	return result{o.String(), e.String(), code}
}

// sandboxRun runs sandbox-run (the binary under test, bound read-only)
// with args in a container from b, with podman's defaults plus extra, and
// the host directories job and out as the container's /job and /out.
func (b *podmanBox) sandboxRun(extra []string, job, out string, args ...string) result {
	b.t.Helper()
	return b.run(append(jobMounts(job, out), extra...), append([]string{"/usr/local/bin/sandbox-run"}, args...)...)
}

// jobDirs returns two directories for a container's /job and /out that
// uid 65534 in the container can write: sandbox-run's uid as root.
// Rootless, that uid is one of the user's subordinate ids, so the
// directories are made writable to all.
func jobDirs(t *testing.T) (job, out string) {
	job, out = sandboxtest.WorkDir(t), sandboxtest.WorkDir(t)
	if os.Geteuid() != 0 {
		for _, d := range []string{job, out} {
			if err := os.Chmod(d, 0o777); err != nil {
				t.Fatal(err)
			}
		}
	}
	return job, out
}

// jobMounts binds sandbox-run and the host directories job and out into
// a container.
func jobMounts(job, out string) []string {
	return []string{"--volume", bin + ":/usr/local/bin/sandbox-run:ro", "--volume", job + ":/job", "--volume", out + ":/out"}
}

// containerFixFlags are the runtime flags the diagnosis names; the
// positive control runs with them.
var containerFixFlags = []string{"--security-opt", "seccomp=unconfined", "--security-opt", "unmask=ALL"}

// TestPodmanDiagnosed: in a container with podman's defaults, sandbox-run's
// default mechanism (bwrap) is refused with exit 125 and one line naming
// the real cause (the seccomp profile refuses sethostname without
// CAP_SYS_ADMIN; mounts mask part of /proc) and the fixes, and runs
// nothing; check reports tier 0 naming the same fix. The positive control
// is the same container with the flags the diagnosis names, where the same
// run works; with the seccomp flag alone the masked /proc is what stops it,
// and is diagnosed as such.
func TestPodmanDiagnosed(t *testing.T) {
	b := newPodman(t)
	job, out := jobDirs(t)
	cmd := []string{"run", "--workdir", "/job", "--", "touch", "/job/ran"}

	r := b.sandboxRun(nil, job, out, cmd...)
	oneLine(t, r, "sandbox-run: ", "seccomp filter", "sethostname without CAP_SYS_ADMIN",
		"--security-opt seccomp=unconfined", "--security-opt unmask=ALL", "--sandbox landlock")
	if _, err := os.Stat(filepath.Join(job, "ran")); err == nil {
		t.Errorf("the command ran although bwrap was refused")
	}

	c := b.sandboxRun(nil, job, out, "check", "--json")
	var rep struct {
		Tier   int `json:"tier"`
		Checks []struct{ ID, Status, Summary, Remediation string }
	}
	if err := json.Unmarshal([]byte(c.stdout), &rep); err != nil {
		t.Fatalf("check --json in the container: %v (exit %d, %q)", err, c.code, c.stderr)
	}
	named := false
	for _, it := range rep.Checks {
		named = named || (it.Status == "fail" && strings.Contains(it.Summary+it.Remediation, "sethostname") &&
			strings.Contains(it.Summary+it.Remediation, "unmask=ALL"))
	}
	if rep.Tier != 0 || c.code != 1 || !named {
		t.Errorf("check in the container: tier %d exit %d, a failed item naming the cause and fix: %v\n%s", rep.Tier, c.code, named, c.stdout)
	}

	// Half the fix: the profile no longer refuses, the masks do.
	r = b.sandboxRun(containerFixFlags[:2], job, out, cmd...)
	oneLine(t, r, "proc mount", "/proc/", "--security-opt unmask=ALL")

	// The whole fix the diagnosis names: the run works, and check finds
	// tier 1, although sandbox-run, the container's root without
	// CAP_SYS_PTRACE, cannot read the namespace links of the sandbox's
	// PID 1 (TestReadbackWithoutPtrace).
	if r := b.sandboxRun(containerFixFlags, job, out, cmd...); r.code != 0 {
		t.Fatalf("control: with %v the run fails: exit %d %q", containerFixFlags, r.code, r.stderr)
	}
	c = b.sandboxRun(containerFixFlags, job, out, "check", "--json")
	if err := json.Unmarshal([]byte(c.stdout), &rep); err != nil || rep.Tier != 1 {
		t.Errorf("check in the container with %v: tier %d (%v), want 1:\n%s", containerFixFlags, rep.Tier, err, c.stdout)
	}
	if _, err := os.Stat(filepath.Join(job, "ran")); err != nil {
		t.Errorf("control: exit 0 but the command did not run: %v", err)
	}
}

// TestPodmanLandlock: in the same container with podman's defaults, where
// bwrap is refused (TestPodmanDiagnosed), --sandbox landlock runs the
// command, confined: it writes its workdir, and a write to a directory the
// same uid may write without the sandbox (the control, run in the same
// container) is denied.
func TestPodmanLandlock(t *testing.T) {
	b := newPodman(t)
	job, out := jobDirs(t)
	// The control: uid 65534, the uid sandbox-run runs the command as,
	// writes /out in the same container without the sandbox.
	ctl := b.run(jobMounts(job, out), "setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "sh", "-c", "echo x >/out/control")
	if _, err := os.Stat(filepath.Join(out, "control")); ctl.code != 0 || err != nil {
		t.Fatalf("untested: uid 65534 cannot write /out without the sandbox: exit %d %q", ctl.code, ctl.stderr)
	}
	script := "touch /job/in && if echo x >/out/escaped; then echo ESCAPED; else echo DENIED; fi"
	r := b.sandboxRun(nil, job, out, "run", "--sandbox", "landlock", "--workdir", "/job", "--summary", "--", "sh", "-c", script)
	if r.code != 0 || !strings.Contains(r.stdout, "DENIED") || !strings.Contains(r.stderr, "tier 1 (landlock") {
		t.Fatalf("--sandbox landlock in the container: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(job, "in")); err != nil {
		t.Errorf("the workdir write did not reach the host: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "escaped")); err == nil {
		t.Errorf("the write outside the workdir happened")
	}
}
