//go:build unix

package mechanism

import (
	"os"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
)

// GroupAttr starts a command in a session of its own, so that SignalGroup
// and KillGroup reach what it starts in its process group (not what it
// moves out with setsid).
func GroupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// SignalGroup sends s to p's process group; a signal that is not a
// syscall.Signal is dropped.
func SignalGroup(p *os.Process, s os.Signal) {
	if sig, ok := s.(syscall.Signal); ok {
		Kill(-p.Pid, sig)
	}
}

// KillGroup kills p's process group with SIGKILL.
func KillGroup(p *os.Process) { Kill(-p.Pid, syscall.SIGKILL) }

// Kill sends sig to pid, or to the process group -pid when pid is
// negative, as kill(2) does, but never to 0, -1 or 1: those name
// sandbox-run's own process group (and a harness that shares it), every
// process it may signal (every process, as root), and the host's init. A
// pid not yet known, or read as 0 from a report that never came, would
// otherwise name them. It says whether the signal was sent.
func Kill(pid int, sig syscall.Signal) bool {
	if pid >= -1 && pid <= 1 {
		return false
	}
	return syscall.Kill(pid, sig) == nil
}

func WaitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return exitcode.OfSignal(int(ws.Signal()))
	}
	return ws.ExitStatus()
}
