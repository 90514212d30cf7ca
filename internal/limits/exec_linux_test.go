package limits

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const naiveEnv = "SANDBOX_RUN_TEST_NAIVE" // exec-under: Apply, allocate, syscall.Exec

func init() {
	helpers["exec-under"] = helperExecUnder
}

// helperExecUnder is the exec shim's path: it prints its own soft
// RLIMIT_NOFILE and VmData, then becomes its arguments under the rlimits
// of $SANDBOX_RUN_TEST_RLIMITS through NewExec and Run. With
// $SANDBOX_RUN_TEST_NAIVE set it does the naive thing instead: Apply, an
// allocation that needs fresh memory (as the argument vectors of
// syscall.Exec sometimes do), syscall.Exec.
func helperExecUnder() int {
	var rs []Rlimit
	if err := json.Unmarshal([]byte(cmp.Or(os.Getenv(rlimitsEnv), "null")), &rs); err != nil {
		fmt.Println("rlimits:", err)
		return 3
	}
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	fmt.Printf("go-nofile=%d vmdata=%d\n", lim.Cur, vmDataKB())
	argv := os.Args[1:]
	env := []string{"PATH=/usr/bin:/bin"}
	if os.Getenv(naiveEnv) != "" {
		// The runtime's crash goes nowhere: its status is the outcome.
		if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
			unix.Dup3(int(null.Fd()), 2, 0)
		}
		if err := Apply(rs); err != nil {
			fmt.Println("apply:", err)
			return 3
		}
		sink = make([]byte, 96<<20)
		err := syscall.Exec(argv[0], argv, env)
		fmt.Println("exec:", err)
		return 3
	}
	x, err := NewExec(rs, argv[0], argv, env)
	if err != nil {
		fmt.Println("new exec:", err)
		return 3
	}
	failed, errno := x.Run()
	fmt.Println("run:", failed, errno)
	return 3
}

var sink []byte

// vmDataKB is the calling process's VmData (kB), -1 if unread.
func vmDataKB() int {
	b, _ := os.ReadFile("/proc/self/status")
	_, v, ok := strings.Cut(string(b), "\nVmData:")
	if !ok {
		return -1
	}
	f := strings.Fields(v)
	if len(f) == 0 {
		return -1
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return -1
	}
	return n
}

// execUnder runs the exec-under helper with rs and cmd (argv[0] a path)
// and returns its two lines of output and its status; env adds to the
// helper's environment.
func execUnder(t *testing.T, rs []Rlimit, env []string, cmd ...string) (self, command string, ws syscall.WaitStatus) {
	t.Helper()
	b, err := json.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, "exec-under", append([]string{rlimitsEnv + "=" + string(b)}, env...), nil, append([]string{os.Args[0]}, cmd...)...)
	self = c.line(t)
	command = c.line(t)
	return self, command, c.wait(t)
}

// TestExecUnderDataBelowTheRuntime: with RLIMIT_DATA below what the Go
// process already maps (32 MiB, the smallest backstop DataBackstop
// gives), Run still becomes the command, which reads the limit back.
// Control: the same limit set by Apply, then an allocation that needs
// fresh memory, ends the process with the runtime's status 2 before its
// syscall.Exec: the hazard is real in that state.
func TestExecUnderDataBelowTheRuntime(t *testing.T) {
	const data = 32 << 20
	rs := []Rlimit{{Data, data, data}, {CPU, 30, 31}}
	script := []string{"/bin/sh", "-c", "echo data=$(ulimit -d) cpu=$(ulimit -t)"}

	self, _, ws := execUnder(t, rs, []string{naiveEnv + "=1"}, script...)
	if kb := vmDataOf(t, self); kb*1024 <= data {
		t.Fatalf("untested: the helper maps %d kB of data, not above the limit %d", kb, data)
	}
	if !ws.Exited() || ws.ExitStatus() != 2 {
		t.Fatalf("untested: Apply then an allocation under data=%d ended with %v, want the runtime's exit 2", data, ws)
	}

	for range 20 {
		_, out, ws := execUnder(t, rs, nil, script...)
		if want := fmt.Sprintf("data=%d cpu=30", data/1024); out != want || ws.ExitStatus() != 0 {
			t.Fatalf("NewExec/Run under data=%d: %q (status %v), want %q", data, out, ws, want)
		}
	}
}

// TestExecRestoresSoftNoFile: the command gets the soft RLIMIT_NOFILE the
// shim started with, which the Go runtime raised in between; a nofile
// limit in the set replaces it. Control: the helper's own soft limit is
// not the one it started with.
func TestExecRestoresSoftNoFile(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Max < 1000 {
		t.Fatalf("untested: hard RLIMIT_NOFILE %d (%v), want room below it", lim.Max, err)
	}
	sh := func(rs []Rlimit) (string, string) {
		b, _ := json.Marshal(rs)
		c := start(t, "exec-under", []string{rlimitsEnv + "=" + string(b)}, nil,
			"/bin/sh", "-c", `ulimit -Sn 200 && exec "$0" /bin/sh -c 'echo nofile=$(ulimit -Sn)'`, os.Args[0])
		self, out := c.line(t), c.line(t)
		if ws := c.wait(t); ws.ExitStatus() != 0 {
			t.Fatalf("exec-under %v: status %v, output %q %q", rs, ws, self, out)
		}
		return self, out
	}
	self, out := sh(nil)
	if strings.HasPrefix(self, "go-nofile=200 ") {
		t.Fatalf("untested: the runtime left the soft limit at 200: %q", self)
	}
	if out != "nofile=200" {
		t.Errorf("the command's soft RLIMIT_NOFILE: %q, want the shim's original, nofile=200", out)
	}
	if _, out = sh([]Rlimit{{NoFile, 64, 64}}); out != "nofile=64" {
		t.Errorf("with nofile 64 in the set: %q, want nofile=64", out)
	}
}

// TestExecRunAllocatesNothing: the part of Run between the first limit
// and execve allocates nothing (limits at their current values, so the
// test process keeps its own).
func TestExecRunAllocatesNothing(t *testing.T) {
	var rs []Rlimit
	for _, r := range Resources() {
		n := resourceNumber[r]
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(n, &cur); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, Rlimit{r, cur.Cur, cur.Max})
	}
	x, err := NewExec(rs, "/bin/true", []string{"true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if failed, errno := x.apply(); errno != 0 {
			t.Fatalf("%s: %v", failed, errno)
		}
	}); n != 0 {
		t.Fatalf("setting the limits allocates %v times per run", n)
	}
}

// TestNewExecRefuses: what NewExec refuses, before anything is set.
func TestNewExecRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		rs   []Rlimit
		argv []string
		want error
	}{
		{"unknown resource", []Rlimit{{"stack", 1, 1}}, []string{"true"}, ErrInvalid},
		{"soft above hard", []Rlimit{{NoFile, 20, 10}}, []string{"true"}, ErrInvalid},
		{"NUL in an argument", nil, []string{"tr\x00ue"}, syscall.EINVAL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewExec(tc.rs, "/bin/true", tc.argv, nil); !errors.Is(err, tc.want) {
				t.Fatalf("NewExec: %v, want %v", err, tc.want)
			}
		})
	}
}

// vmDataOf reads vmdata=N from the helper's first line.
func vmDataOf(t *testing.T, line string) int {
	t.Helper()
	_, v, _ := strings.Cut(line, "vmdata=")
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("helper said %q", line)
	}
	return n
}
