package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	llmech "github.com/sandbox-run/sandbox-run/internal/mechanism/landlock"

	"github.com/sandbox-run/sandbox-run/internal/hostnet"
	"github.com/sandbox-run/sandbox-run/internal/procid"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/landlock"
	"github.com/sandbox-run/sandbox-run/policy"
)

// runHelperEnv selects a run this test binary makes instead of running
// the tests (TestMain), in a child process a test starts.
const runHelperEnv = "SANDBOX_RUN_TEST_RUN"

// runHelper makes the run mode names and returns its exit status. The one
// mode, landlock-tmpdir: a landlock run in the workdir $NSTEST_WORK whose
// command prints its TMPDIR (the run's directory in the host's TMPDIR)
// and sleeps, to be killed.
func runHelper(mode string) int {
	if mode != "landlock-tmpdir" {
		fmt.Fprintf(os.Stderr, "unknown run helper %q\n", mode)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := policy.Policy{Sandbox: policy.ModeLandlock, Workdir: os.Getenv("NSTEST_WORK")}
	res, err := Run(ctx, p, []string{"sh", "-c", `echo "$TMPDIR"; exec sleep 120`}, Options{Stdout: os.Stdout, Stderr: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return res.ExitCode
}

// TestKilledRunDirSweptAfterPIDNamespace: a landlock run (its TMPDIR, a
// run directory, lives as long as the run) whose sandbox-run ran in a pid
// namespace of its own, as in a container sharing the host's TMPDIR, is
// killed with that namespace; the next run on the host removes the
// directory, while it kept it as long as the run lived.
//
// The control, that the test can fail: a directory of the same killed
// run named as before runs held their directories (no lock; judged by
// the pid alone, which means nothing on the host) is kept.
func TestKilledRunDirSweptAfterPIDNamespace(t *testing.T) {
	sandboxtest.Landlock(t, landlock.MinABI)
	// As non-root, the run in the namespace would be root in a user
	// namespace where the sandbox's uid 65534 is not mapped.
	sandboxtest.Root(t)
	tmp := sandboxtest.WorkDir(t) // reachable by the sandbox's uid, as TMPDIR must be
	t.Setenv("TMPDIR", tmp)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := sandboxtest.PIDNamespace(t, true, exe)
	c.Env = append(c.Env, runHelperEnv+"=landlock-tmpdir", "NSTEST_WORK="+sandboxtest.WorkDir(t))
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	defer c.Process.Kill() // the namespace with it (--kill-child)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the run in the namespace: %v", err)
	}
	held := strings.TrimSpace(line)
	ids, suffix, _ := strings.Cut(strings.TrimPrefix(filepath.Base(held), llmech.TmpPrefix), "-")
	id, err := procid.Parse(ids)
	if err != nil || filepath.Dir(held) != tmp || !strings.HasPrefix(suffix, "h") {
		t.Fatalf("the run's TMPDIR %s: want a held run directory in %s (%v)", held, tmp, err)
	}
	unheld := filepath.Join(tmp, hostnet.RunDirPattern(llmech.TmpPrefix, id)+"1")
	if err := os.Mkdir(unheld, 0o700); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Chown(t, unheld)

	hostRun(t)
	for _, p := range []string{held, unheld} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("the live run's directory %s, in its live pid namespace, was swept", filepath.Base(p))
		}
	}

	sandboxtest.EndPIDNamespace(t, c)
	hostRun(t)
	if _, err := os.Lstat(held); err == nil {
		t.Errorf("the directory %s of a run killed with its pid namespace was kept", filepath.Base(held))
	}
	if _, err := os.Lstat(unheld); err != nil {
		t.Errorf("control: the killed run's unheld directory %s was swept too: the test cannot show that the lock is what judged the held one", filepath.Base(unheld))
	}
}

// hostRun makes a landlock run here, which sweeps TMPDIR.
func hostRun(t *testing.T) {
	t.Helper()
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p := policy.Policy{Sandbox: policy.ModeLandlock, Workdir: sandboxtest.WorkDir(t)}
	res, err := Run(ctx, p, []string{"true"}, Options{Stdout: null, Stderr: null})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run on the host: %v (result %+v)", err, res)
	}
}
