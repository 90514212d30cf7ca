//go:build unix

package sandbox

import (
	"os"
	"syscall"
)

func offSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

func signalGroup(p *os.Process, s os.Signal) {
	if sig, ok := s.(syscall.Signal); ok {
		syscall.Kill(-p.Pid, sig)
	}
}

func killGroup(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGKILL) }
