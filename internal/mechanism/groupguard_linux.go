package mechanism

import (
	"errors"
	"os"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/fault"
)

// guardShell is the group guard's program, for the host's /bin/sh: read
// standard input to its end (no line ever comes), then SIGKILL the
// guard's process group (pid 0), the guard itself included. read and
// kill are builtins of every POSIX shell (dash, bash, busybox ash).
const guardShell = "read x; kill -9 0"

// GroupGuard is a process that outlives sandbox-run to end what
// sandbox-run started when sandbox-run itself is killed. It leads a
// process group of its own, and a mechanism starts its helper (bwrap or
// the network namespace helper that becomes bwrap; runsc and every runsc
// command of the run) into that group (Join); every process the helper
// forks stays in it until it calls setsid. The guard reads a pipe whose
// only writer is sandbox-run (close-on-exec, never written): end of file
// means sandbox-run is gone, and the guard then sends SIGKILL to its
// whole group, itself included.
//
// Why: the parent-death signal covers the process sandbox-run started,
// not what that process forks before it arms its own, nor a process
// sandbox-run starts without one. bubblewrap (0.8.0 at least) clones the
// sandbox's PID 1 and lets it block reading an eventfd until the parent
// bwrap has written the id maps and --info-fd; a parent that dies in
// between (sandbox-run killed: the parent-death signal; or a write to
// --info-fd whose reader is gone) leaves that child blocked forever,
// reparented to PID 1, with no death signal of its own (it arms
// --die-with-parent only later). Nothing can wake it but a SIGKILL, and
// after sandbox-run's death only a process that survives it can send one.
// The child is still in bwrap's process group then (bwrap calls setsid
// after the wait), so the group names it without a pid to learn, and
// nothing outside sandbox-run can join the group (setpgid needs the same
// session, and the sandbox's command runs in a session of its own).
// Under gVisor, `runsc delete` and `runsc kill` (a timeout's or a
// signal's end of the run) carry no death signal: a sandbox-run killed
// while one ran left it running, reparented to PID 1, on the run's state
// (measured: a runsc delete alive, its parent PID 1, in 3 of 6 kills
// during a --timeout's end).
//
// Guaranteed: once the helper is started, sandbox-run's death by any
// cause ends every process of the group (the kernel closes the pipe
// whatever the cause). Not covered: a process that has left the group by
// setsid (the sandbox's PID 1 past bwrap's wait, which arms its own death
// signal or ends at the closed gate; runsc's sandbox process, which runsc
// starts with a death signal of its own), and a guard that is itself
// killed.
type GroupGuard struct {
	pid int
	w   *os.File // sandbox-run's end of the guard's pipe
}

// StartGroupGuard starts the guard: the host's /bin/sh running
// guardShell, in a process group of its own. A shell rather than
// sandbox-run itself: a Go process's start-up (its runtime's threads)
// competes with bwrap's for the CPU; under load a sandbox-run guard cost
// 15% of a run's wall time, a shell 5% (interleaved medians, load average
// 22-50 on 2 cores).
func StartGroupGuard() (*GroupGuard, error) {
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, fault.New("cannot create a pipe", err.Error(), "raise the descriptor limit")
	}
	defer rd.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		wr.Close()
		return nil, fault.New("cannot open /dev/null", err.Error(), "check /dev")
	}
	defer devnull.Close()
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", guardShell}, &syscall.ProcAttr{
		Env:   []string{},
		Files: []uintptr{rd.Fd(), devnull.Fd(), devnull.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		wr.Close()
		return nil, fault.New("cannot start sandbox-run's process-group guard", err.Error(),
			"check that /bin/sh is an executable shell")
	}
	return &GroupGuard{pid: pid, w: wr}, nil
}

// Join sets a on starting into the guard's group.
func (g *GroupGuard) Join(a *syscall.SysProcAttr) { a.Setpgid, a.Pgid = true, g.pid }

// End kills the guard's group (the guard, and any process of the
// helper's still in it: the helper has ended, so none should be) and
// reaps the guard. Called once the helper and every command started
// into the group have ended.
func (g *GroupGuard) End() {
	Kill(-g.pid, syscall.SIGKILL)
	g.w.Close()
	for {
		if _, err := syscall.Wait4(g.pid, nil, 0, nil); !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}
