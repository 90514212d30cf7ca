package sandbox

import (
	"os"
	"syscall"
)

func offSysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(p *os.Process, s os.Signal) { p.Signal(s) }

func killGroup(p *os.Process) { p.Kill() }
