package sandboxtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// PIDNamespace returns a command that runs argv as pid 1 of a new pid
// namespace (unshare --pid --fork), with its own /proc when mountProc; as
// non-root in a user namespace too, mapped to root there. Killing the
// command's process (unshare) kills the namespace too (--kill-child), so
// that a test that fails leaves nothing running. It is unavailable
// (Unavailable) when unshare is missing or cannot make the namespaces.
// The command inherits the test's environment and stderr.
func PIDNamespace(t testing.TB, mountProc bool, argv ...string) *exec.Cmd {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		Unavailable(t, "unshare", "install util-linux")
	}
	args := []string{"--pid", "--fork", "--kill-child"}
	if mountProc {
		args = append(args, "--mount-proc")
	}
	if os.Geteuid() != 0 {
		args = append(args, "--user", "--map-root-user")
	}
	if out, err := exec.Command(unshare, append(args, "true")...).CombinedOutput(); err != nil {
		Unavailable(t, "pid namespaces", fmt.Sprintf("unshare %v: %v: %s (run as root or enable unprivileged user namespaces)", args, err, out))
	}
	c := exec.Command(unshare, append(args, argv...)...)
	c.Env = os.Environ()
	c.Stderr = os.Stderr
	return c
}

// EndPIDNamespace tears down the pid namespace that c (a started
// PIDNamespace command) made, as a container's end does: SIGKILL to its
// pid 1, which the kernel passes to every process in it, so that nothing
// there runs its cleanup. It waits for c and fails t unless no process is
// left in the namespace, which is then gone: its pids can be judged by no
// one any more.
func EndPIDNamespace(t testing.TB, c *exec.Cmd) {
	t.Helper()
	pid1 := childOf(c.Process.Pid)
	if pid1 == 0 {
		t.Fatalf("unshare (pid %d) has no child: the namespace's pid 1 is gone already", c.Process.Pid)
	}
	ns, err := pidNS(pid1)
	if err != nil {
		t.Fatal(err)
	}
	if own, _ := pidNS(os.Getpid()); own == ns {
		t.Fatalf("pid %d is in the test's own pid namespace", pid1)
	}
	if err := syscall.Kill(pid1, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.Wait() // unshare reports the signal; pid 1 reaped every process of its namespace before it could be reaped
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left := inPIDNS(ns)
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d is still in the killed pid namespace %d", left, ns)
		}
	}
}

// childOf returns a child of pid, 0 for none: the only one, for unshare.
func childOf(pid int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// After the command's name, the last ')': state, then ppid.
		f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
		if len(f) > 1 && string(f[1]) == strconv.Itoa(pid) {
			return p
		}
	}
	return 0
}

// pidNS is the inode of pid's pid namespace.
func pidNS(pid int) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid)+"/ns/pid", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// inPIDNS returns a process in the pid namespace ns, 0 when there is
// none (that this user may see: an unprivileged user's namespace holds
// only its own processes).
func inPIDNS(ns uint64) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if got, err := pidNS(p); err == nil && got == ns {
			return p
		}
	}
	return 0
}
