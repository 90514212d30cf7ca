package limits

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// Environment of the helper modes.
const (
	rlimitsEnv = "SANDBOX_RUN_TEST_RLIMITS" // apply-exec: what to Apply
	nextEnv    = "SANDBOX_RUN_TEST_NEXT"    // apply-exec: the helper mode of its child
	mbEnv      = "SANDBOX_RUN_TEST_MB"      // hold, hog, spread: megabytes
	countEnv   = "SANDBOX_RUN_TEST_COUNT"   // spread: processes
)

// helperLife bounds every helper that waits: none outlives it.
const helperLife = 20 * time.Second

func init() {
	helpers["apply-exec"] = helperApplyExec
	helpers["probe-nofile"] = helperProbeNoFile
	helpers["probe-fsize"] = helperProbeFSize
	helpers["probe-nproc"] = helperProbeNProc
	helpers["hold"] = helperHold
	helpers["hog"] = helperHog
	helpers["spread"] = helperSpread
	helpers["spin"] = helperSpin
	helpers["memfd-map"] = helperMemfdMap
}

// helperApplyExec does what init does: Apply the rlimits, then
// syscall.ForkExec its arguments (or the test binary in mode $NEXT) and
// exit with the child's status, 128+N for a signal.
func helperApplyExec() int {
	var rs []Rlimit
	err := json.Unmarshal([]byte(cmp.Or(os.Getenv(rlimitsEnv), "null")), &rs)
	if err == nil {
		err = Apply(rs)
	}
	if err != nil {
		fmt.Println("apply:", err)
		return 3
	}
	argv := os.Args[1:]
	if len(argv) == 0 {
		argv = []string{os.Args[0]}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Println("lookpath:", err)
		return 3
	}
	env := []string{sandboxtest.HelperEnv + "=" + os.Getenv(nextEnv), "PATH=/usr/bin:/bin", "TMPDIR=" + os.TempDir()}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		fmt.Println("forkexec:", err)
		return 3
	}
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

func errnoName(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return fmt.Sprint(err)
}

func helperProbeNoFile() int {
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	n := 0
	for ; n < 100000; n++ {
		if _, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err != nil {
			fmt.Printf("soft=%d opened=%d err=%s\n", lim.Cur, n, errnoName(err))
			return 0
		}
	}
	fmt.Printf("soft=%d opened=%d err=none\n", lim.Cur, n)
	return 0
}

func helperProbeFSize() int {
	f, err := os.CreateTemp("", "limits-fsize-")
	if err != nil {
		fmt.Println("create:", err)
		return 3
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	total := 0
	for total < 16<<20 {
		n, err := f.Write(buf)
		total += n
		if err != nil {
			fmt.Printf("written=%d err=%s\n", total, errnoName(err))
			return 0
		}
	}
	fmt.Printf("written=%d err=none\n", total)
	return 0
}

// helperProbeNProc starts /bin/sleep until fork fails (at most 200), then
// kills them.
func helperProbeNProc() int {
	var pids []int
	defer func() {
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
			var ws syscall.WaitStatus
			syscall.Wait4(p, &ws, 0, nil)
		}
	}()
	for len(pids) < 200 {
		pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "20"}, &syscall.ProcAttr{Files: []uintptr{0, 1, 2}})
		if err != nil {
			fmt.Printf("started=%d err=%s\n", len(pids), errnoName(err))
			return 0
		}
		pids = append(pids, pid)
	}
	fmt.Printf("started=%d err=none\n", len(pids))
	return 0
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// touch allocates n bytes and writes every page, so they are resident.
func touch(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b
}

// helperHold holds $MB megabytes, says "ready" and sleeps.
func helperHold() int {
	b := touch(envInt(mbEnv, 1) << 20)
	fmt.Println("ready")
	time.Sleep(helperLife)
	runtime.KeepAlive(b)
	return 0
}

// helperMemfdMap holds a memfd of $MB megabytes that it also maps and
// touches, as runsc's sandbox process holds and maps its memory file,
// says "ready" and sleeps.
func helperMemfdMap() int {
	n := envInt(mbEnv, 1) << 20
	fd, err := unix.MemfdCreate("memory-file", 0)
	if err == nil {
		err = unix.Ftruncate(fd, int64(n))
	}
	var b []byte
	if err == nil {
		b, err = unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
	if err != nil {
		fmt.Println(err)
		return 1
	}
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	fmt.Println("ready")
	time.Sleep(helperLife)
	return 0
}

// helperHog allocates and touches memory 4 MiB at a time up to $MB
// megabytes, then sleeps.
func helperHog() int {
	var keep [][]byte
	for i := 0; i < envInt(mbEnv, 64)/4; i++ {
		keep = append(keep, touch(4<<20))
	}
	fmt.Println("capped")
	time.Sleep(helperLife)
	runtime.KeepAlive(keep)
	return 0
}

// helperSpread starts $COUNT hold helpers of $MB each, says "ready" when
// all are, and sleeps.
func helperSpread() int {
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}()
	for i := 0; i < envInt(countEnv, 2); i++ {
		c := exec.Command(os.Args[0])
		c.Env = []string{sandboxtest.HelperEnv + "=hold", mbEnv + "=" + os.Getenv(mbEnv)}
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := c.StdoutPipe()
		if err == nil {
			err = c.Start()
		}
		if err != nil {
			fmt.Println("start:", err)
			return 3
		}
		cmds = append(cmds, c)
		if l, _ := bufio.NewReader(out).ReadString('\n'); l != "ready\n" {
			fmt.Println("hold did not start")
			return 3
		}
	}
	fmt.Println("ready")
	time.Sleep(helperLife)
	return 0
}

// helperSpin burns CPU for at most 10 s.
func helperSpin() int {
	end := time.Now().Add(10 * time.Second)
	x := 0
	for time.Now().Before(end) {
		for i := 0; i < 1e6; i++ {
			x += i
		}
	}
	return x & 1
}

// child is a helper (or any command) started by a test, in its own process
// group, killed with that group and reaped when the test ends.
type child struct {
	cmd *exec.Cmd
	out *bufio.Reader
}

// start runs the test binary in helper mode (or argv when given) with
// extra environment; sys may add to its SysProcAttr.
func start(t *testing.T, mode string, env []string, sys *syscall.SysProcAttr, argv ...string) *child {
	t.Helper()
	if len(argv) == 0 {
		argv = []string{os.Args[0]}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{sandboxtest.HelperEnv + "=" + mode, "PATH=/usr/bin:/bin", "TMPDIR=" + os.TempDir()}, env...)
	if sys == nil {
		sys = &syscall.SysProcAttr{}
	}
	sys.Setpgid = true
	cmd.SysProcAttr = sys
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", mode, err)
	}
	c := &child{cmd: cmd, out: bufio.NewReader(out)}
	t.Cleanup(func() { c.stop(t) })
	return c
}

// line reads one line of the child's output, failing the test after 20 s.
func (c *child) line(t *testing.T) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		l, _ := c.out.ReadString('\n')
		ch <- strings.TrimSpace(l)
	}()
	select {
	case l := <-ch:
		return l
	case <-time.After(helperLife):
		t.Fatalf("no output from pid %d within %v", c.cmd.Process.Pid, helperLife)
		return ""
	}
}

// wait reaps the child (at most 20 s) and returns its status.
func (c *child) wait(t *testing.T) syscall.WaitStatus {
	t.Helper()
	io.Copy(io.Discard, c.out)
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(helperLife):
		t.Fatalf("pid %d did not end within %v", c.cmd.Process.Pid, helperLife)
	}
	return c.cmd.ProcessState.Sys().(syscall.WaitStatus)
}

// stop kills the child's process group until no member is left (bounded)
// and reaps the child.
func (c *child) stop(t *testing.T) {
	pgid := c.cmd.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err == syscall.ESRCH {
			break
		}
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
		time.Sleep(5 * time.Millisecond)
	}
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
	if syscall.Kill(-pgid, 0) != syscall.ESRCH {
		t.Errorf("process group %d survived 5 s of SIGKILL", pgid)
	}
}

// bomb is a shell fork bomb bounded in depth (at most 2^(depth+2)
// processes) and in time (each process ends after 5 s).
func bomb(depth int) []string {
	return []string{"/bin/sh", "-c",
		`b() { if [ "$1" -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & fi; sleep 5; wait; }; echo ready; b ` + strconv.Itoa(depth)}
}

// receive waits for one value from ch, at most d.
func receive(t *testing.T, ch <-chan Exceeded, d time.Duration) (Exceeded, bool) {
	t.Helper()
	select {
	case x, ok := <-ch:
		return x, ok
	case <-time.After(d):
		return Exceeded{}, false
	}
}

func fmtSscanf(s string, started *int, errno *string) (int, error) {
	return fmt.Sscanf(strings.ReplaceAll(s, "=", " "), "started %d err %s", started, errno)
}
