package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/landlock"
)

// TestLandlockWhereBwrapIsRefused stands in for a container that blocks
// user namespaces: sandbox-run runs inside an outer bwrap with
// --disable-userns. There the default (bwrap) is refused with exit 125 and
// a fix that names --sandbox landlock (the positive control: the refusal
// is real), and --sandbox landlock runs the command confined. It is a
// FAKE container; TestPodmanLandlock runs the same in Debian's podman.
func TestLandlockWhereBwrapIsRefused(t *testing.T) {
	bw := sandboxtest.Bwrap(t)
	sandboxtest.Landlock(t, landlock.MinABI)
	w := sandboxtest.WorkDir(t)
	home := sandboxtest.WorkDir(t) // the outer user's own home and cache, not the workdir
	uid := os.Getuid()
	if uid == 0 {
		uid = 65534 // the owner of w: the outer bwrap runs as it, unprivileged
	}
	outer := func(args ...string) (string, int) {
		a := append([]string{"--unshare-user", "--disable-userns", "--uid", strconv.Itoa(uid), "--gid", strconv.Itoa(uid),
			"--unshare-pid", "--die-with-parent", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--chdir", w, "--", bin}, args...)
		c := exec.Command(bw, a...)
		c.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin"}
		if os.Getuid() == 0 {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
		}
		out, err := c.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := outer("run", "--", "true")
	if code != 125 || !strings.Contains(out, "--sandbox landlock") {
		t.Fatalf("untested: bwrap in the outer sandbox was not refused with the landlock fix: exit %d: %s", code, out)
	}
	out, code = outer("run", "--sandbox", "landlock", "--summary", "--", "sh", "-c", "cat /etc/hostname >/dev/null && echo inside; echo x > /etc/passwd-sbx || echo refused")
	if code != 0 || !strings.Contains(out, "inside") || !strings.Contains(out, "refused") || !strings.Contains(out, "tier 1 (landlock") {
		t.Errorf("--sandbox landlock where bwrap is refused: exit %d: %s", code, out)
	}
}
