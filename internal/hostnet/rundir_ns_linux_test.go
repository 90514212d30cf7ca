package hostnet

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/procid"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

const nsPrefix = "sandbox-run-nstest-"

func init() {
	helpers["self"] = helperSelf
	helpers["self-exit"] = helperSelfExit
	helpers["sweep-inside"] = helperSweepInside
}

// helperSelf prints this process's procid name and waits for stdin to
// close: a live run in its namespace.
func helperSelf() int {
	if helperSelfExit() != 0 {
		return 1
	}
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// helperSelfExit prints this process's procid name and ends.
func helperSelfExit() int {
	me, _, err := procid.Self()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(me)
	return 0
}

// helperSweepInside, in a namespace of its own, names run directories in
// $NSTEST_TMP for an ended process of its namespace (a child of its own)
// and for itself, sweeps, and prints the names left.
func helperSweepInside() int {
	tmp := os.Getenv("NSTEST_TMP")
	c := exec.Command("/proc/self/exe")
	c.Env = append(os.Environ(), sandboxtest.HelperEnv+"=self-exit")
	out, err := c.Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	ended, err := procid.Parse(strings.TrimSpace(string(out)))
	me, _, err2 := procid.Self()
	if err != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, err, err2)
		return 1
	}
	for name, id := range map[string]procid.ID{"ended": ended, "live": me} {
		if err := os.Mkdir(filepath.Join(tmp, RunDirPattern(nsPrefix, id)+name), 0o700); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	sweepRunDirs(tmp, nsPrefix, os.Geteuid())
	fmt.Println(strings.Join(leftIn(tmp), " "))
	return 0
}

// leftIn lists the run directories left in tmp, each by its -SUFFIX,
// sorted.
func leftIn(tmp string) []string {
	ents, _ := os.ReadDir(tmp)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name()[strings.LastIndexByte(e.Name(), '-')+1:])
	}
	sort.Strings(left)
	return left
}

// inPIDNamespace returns a command that runs the test binary's helper
// mode as pid 1 of a new pid namespace, with its own /proc when
// mountProc (sandboxtest.PIDNamespace).
func inPIDNamespace(t *testing.T, mode string, mountProc bool) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := sandboxtest.PIDNamespace(t, mountProc, exe)
	c.Env = append(c.Env, sandboxtest.HelperEnv+"="+mode)
	return c
}

// TestSweepKeepsOtherPIDNamespaceRun: a run directory named by a live
// process in another pid namespace (whose pid there is 1: on the host,
// pid 1 is another process) is not swept from the host, while it lives or
// after it ended (the host cannot tell; a run in its namespace can, see
// TestSweepInsidePIDNamespace). The control: the same process named the
// legacy way, without its namespace, is swept while it lives, as every
// name was before names carried their namespace.
func TestSweepKeepsOtherPIDNamespaceRun(t *testing.T) {
	c := inPIDNamespace(t, "self", true)
	stdin, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	id, err := procid.Parse(strings.TrimSpace(line))
	if err != nil || id.NS == "" {
		t.Fatalf("helper named itself %q: %v", line, err)
	}
	me, _, _ := procid.Self()
	if id.NS == me.NS {
		t.Fatalf("helper's namespace token %s is the host's", id.NS)
	}
	tmp := t.TempDir()
	named := filepath.Join(tmp, RunDirPattern(nsPrefix, id)+"ns-named")
	legacy := filepath.Join(tmp, RunDirPattern(nsPrefix, procid.ID{PID: id.PID, Start: id.Start})+"ns-legacy")
	for _, p := range []string{named, legacy} {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}

	sweepRunDirs(tmp, nsPrefix, os.Geteuid())
	if _, err := os.Lstat(named); err != nil {
		t.Errorf("the live run's directory %s, of another pid namespace, was swept", filepath.Base(named))
	}
	if _, err := os.Lstat(legacy); err == nil {
		t.Errorf("control: the legacy name %s (pid %d read on the host) was kept: the test cannot show a misjudgement", filepath.Base(legacy), id.PID)
	}

	stdin.Close()
	if err := c.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	sweepRunDirs(tmp, nsPrefix, os.Geteuid())
	if _, err := os.Lstat(named); err != nil {
		t.Errorf("the ended run's directory %s, of another pid namespace, was swept from the host, which cannot judge it", filepath.Base(named))
	}
}

// TestSweepInsidePIDNamespace: a sweep in a pid namespace of its own,
// with its own /proc, judges the names made there: the directory of an
// ended process goes, the live one's stays. Without its own /proc (pids
// read there are the host's) it cannot judge, and keeps both.
func TestSweepInsidePIDNamespace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mountProc bool
		want      string
	}{
		{"own proc", true, "live"},
		{"host proc", false, "ended live"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := inPIDNamespace(t, "sweep-inside", tc.mountProc)
			tmp := t.TempDir()
			c.Env = append(c.Env, "NSTEST_TMP="+tmp)
			out, err := c.Output()
			if err != nil {
				t.Fatalf("helper: %v", err)
			}
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Errorf("left after the sweep in the namespace: %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRunDirSocketPathLength: the longest socket path in a network run
// directory under /tmp, with the longest pid, a start time of 12 digits
// (three centuries of uptime at 100 Hz) and a token with a time
// namespace, stays under sun_path's 108 bytes with room to spare.
func TestRunDirSocketPathLength(t *testing.T) {
	id := procid.ID{PID: 4194304, Start: 999999999999, NS: "fffffffftffffffff"}
	p := filepath.Join("/tmp", RunDirPattern(DirPrefix, id)+"4294967295", "publish-999.sock")
	if len(p) > 90 {
		t.Errorf("%s: %d bytes, want at most 90 (sun_path holds 107)", p, len(p))
	}
}
