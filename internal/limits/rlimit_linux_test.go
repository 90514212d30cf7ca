package limits

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// applyExec runs init's path: the apply-exec helper (from bin, the test
// binary when "") Applies rlimits, then syscall.ForkExecs cmd, or itself in
// helper mode probe when cmd is empty. It returns the first line of output
// and apply-exec's status (128+N when the command died of signal N).
func applyExec(t *testing.T, rlimits []Rlimit, probe string, sys *syscall.SysProcAttr, bin string, cmd ...string) (string, syscall.WaitStatus) {
	t.Helper()
	if bin == "" {
		bin = os.Args[0]
	}
	b, err := json.Marshal(rlimits)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{rlimitsEnv + "=" + string(b), nextEnv + "=" + probe}
	c := start(t, "apply-exec", env, sys, append([]string{bin}, cmd...)...)
	out := c.line(t)
	return out, c.wait(t)
}

func TestApplyNoFileGivesEMFILE(t *testing.T) {
	out, ws := applyExec(t, Rlimits(Limits{NoFile: 16}), "probe-nofile", nil, "")
	// 0, 1, 2 are open, so at most 13 more fit under 16.
	if ws.ExitStatus() != 0 || !strings.HasPrefix(out, "soft=16 ") || !strings.HasSuffix(out, "err=EMFILE") {
		t.Fatalf("probe under nofile=16: %q (status %v), want soft=16 ... err=EMFILE", out, ws)
	}
	// Positive control: without the limit the same probe opens more.
	out, _ = applyExec(t, nil, "probe-nofile", nil, "")
	if strings.HasPrefix(out, "soft=16 ") {
		t.Fatalf("control: probe without limit reports %q", out)
	}
}

func TestApplyFSizeGivesEFBIG(t *testing.T) {
	out, ws := applyExec(t, Rlimits(Limits{FSize: 64 << 10}), "probe-fsize", nil, "")
	if ws.ExitStatus() != 0 || out != "written=65536 err=EFBIG" {
		t.Fatalf("probe under fsize=64KiB: %q (status %v), want written=65536 err=EFBIG", out, ws)
	}
	out, _ = applyExec(t, nil, "probe-fsize", nil, "")
	if out != "written=16777216 err=none" {
		t.Fatalf("control: probe without limit: %q", out)
	}
}

func TestApplyCPUEndsWithSIGXCPU(t *testing.T) {
	// A shell busy loop, not the Go helper: the Go runtime turns SIGXCPU
	// into a crash with exit status 2, a command's default is to die of it.
	_, ws := applyExec(t, []Rlimit{{CPU, 1, 2}}, "", nil, "", "/bin/sh", "-c", "echo go; i=0; while [ $i -lt 100000000 ]; do i=$((i+1)); done")
	if !ws.Exited() || ws.ExitStatus() != 128+int(syscall.SIGXCPU) {
		t.Fatalf("busy loop under cpu=1:2 ended with %v, want exit %d (SIGXCPU)", ws, 128+int(syscall.SIGXCPU))
	}
	if k := Classify(Evidence{Signal: ws.ExitStatus() - 128, CPULimit: 1e9}); k != CpuLimit {
		t.Fatalf("Classify = %v, want cpu_limit", k)
	}
}

func TestApplyCoreAndOnlyTightens(t *testing.T) {
	out, _ := applyExec(t, []Rlimit{{Core, 0, 0}, {NoFile, Infinity, Infinity}}, "", nil, "", "/bin/sh", "-c", "echo $(ulimit -c) $(ulimit -Hn) $(ulimit -n)")
	var cur syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &cur)
	// nofile=inf cannot raise the hard limit: it stays what it was.
	f := strings.Fields(out)
	if len(f) != 3 || f[0] != "0" || f[1] != ulimitValue(cur.Max) {
		t.Fatalf("ulimit -c -Hn -n after core=0,nofile=inf: %q, want 0 %d ...", out, cur.Max)
	}
}

// TestNProcPerUserNamespace shows what Plan relies on: in a user
// namespace of its own, as an id that is not host root, RLIMIT_NPROC
// refuses forks at the limit (EAGAIN).
func TestNProcPerUserNamespace(t *testing.T) {
	sandboxtest.ProcessCount(t)
	sandboxtest.Root(t)
	sys := &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 65534, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 65534, Size: 1}},
		// Without setuid the child keeps kernel uid 0, exempt from
		// RLIMIT_NPROC, even though its namespace does not map it.
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
	}
	// The test binary's directory is root's own; uid 65534 needs a copy.
	bin := sandboxtest.WorkDir(t) + "/limits.test"
	b, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.WriteFile(bin, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	out, ws := applyExec(t, []Rlimit{{NProc, 30, 30}}, "probe-nproc", sys, bin)
	if strings.HasPrefix(out, "apply:") || ws.ExitStatus() != 0 {
		t.Fatalf("probe: %q, %v", out, ws)
	}
	var started int
	var errno string
	if _, err := fmtSscanf(out, &started, &errno); err != nil || errno != "EAGAIN" || started >= 30 {
		t.Fatalf("probe under nproc=30 in a user namespace: %q, want started<30 err=EAGAIN", out)
	}
	t.Logf("%s (the Go helpers' threads count too)", out)
}

func ulimitValue(v uint64) string {
	if v == Infinity {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}
