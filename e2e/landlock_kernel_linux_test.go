package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

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

// TestLandlockRefusedBelowMinABI runs where the kernel's Landlock ABI is
// below landlock.MinABI (make test-vm boots Debian 12's 6.1, ABI 2):
// --sandbox landlock is refused with exit 125 and the reason, while bwrap
// runs the same command (the control: the refusal is Landlock's ABI, not
// the host), and check --sandbox landlock fails with that reason and lists
// landlock as not available.
// Elsewhere it is unavailable (a failure under
// SANDBOX_REQUIRE_OLD_LANDLOCK=1).
func TestLandlockRefusedBelowMinABI(t *testing.T) {
	needBwrap(t)
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		abi = 0 // not built in, or not in the lsm= list
	}
	if abi >= landlock.MinABI {
		sandboxtest.KernelUnavailable(t, sandboxtest.RequireOldLandlockEnv, "a Landlock ABI below "+strconv.Itoa(landlock.MinABI),
			"this kernel has Landlock ABI "+strconv.Itoa(abi))
		return
	}
	lsm, _ := os.ReadFile("/sys/kernel/security/lsm")
	var u unix.Utsname
	unix.Uname(&u)
	t.Logf("kernel %s: Landlock ABI %d (errno %v), lsm %q", unix.ByteSliceToString(u.Release[:]), abi, err, lsm)
	have := "no Landlock"
	if abi > 0 {
		have = "Landlock ABI " + strconv.Itoa(abi)
	}
	reason := "needs Landlock ABI " + strconv.Itoa(landlock.MinABI) + " (" + landlock.KernelFor(landlock.MinABI) + "); this kernel has " + have

	w := sandboxtest.WorkDir(t)
	if ctl := sandboxed(t, w, "echo ran"); ctl.code != 0 || !strings.Contains(ctl.stdout, "ran") {
		t.Fatalf("untested: the same command under bwrap did not run: exit %d: %s", ctl.code, ctl.stderr)
	}
	r := sandboxed(t, w, "echo ran", "--sandbox", "landlock")
	oneLine(t, r, "sandbox-run: --sandbox landlock: ", reason, "; fix: ")
	if strings.Contains(r.stdout, "ran") {
		t.Errorf("the command ran although --sandbox landlock was refused: %s", r.stdout)
	}

	// check's own probes run slowly under make test-vm's emulation: a
	// longer bound than run's.
	items := func(args ...string) (map[string]checkItem, int) {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%v: %v", args, err)
		}
		c := result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
		var out struct {
			Checks []checkItem `json:"checks"`
		}
		if err := json.Unmarshal([]byte(c.stdout), &out); err != nil {
			t.Fatalf("%v: exit %d, not JSON (%v): %s %s", args, c.code, err, c.stdout, c.stderr)
		}
		m := map[string]checkItem{}
		for _, it := range out.Checks {
			m[it.ID] = it
		}
		return m, c.code
	}
	// check --sandbox landlock tries a real run: it fails, with the reason.
	its, code := items("check", "--sandbox", "landlock", "--json")
	if it := its["sandbox"]; code == 0 || it.Status != "fail" || !strings.Contains(it.Summary, reason) {
		t.Errorf("check --sandbox landlock: exit %d, sandbox item %+v", code, it)
	}
	// Its landlock item is the one plain check lists (check's
	// landlockItem); plain check is left out here: its bwrap probes take
	// minutes under make test-vm's emulation.
	if it := its["landlock"]; !strings.Contains(it.Summary, "--sandbox landlock is not available") || !strings.Contains(it.Summary, reason) {
		t.Errorf("check --sandbox landlock: landlock item %+v", it)
	}
}

// checkItem is the part of check --json's items the landlock tests read.
type checkItem struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Summary string `json:"summary"`
}
