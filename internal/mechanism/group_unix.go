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
		syscall.Kill(-p.Pid, sig)
	}
}

// KillGroup kills p's process group with SIGKILL.
func KillGroup(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGKILL) }

func WaitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return exitcode.OfSignal(int(ws.Signal()))
	}
	return ws.ExitStatus()
}
