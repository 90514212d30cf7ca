//go:build !linux

package connbroker

import (
	"errors"
	"syscall"
)

// Ports is Linux's alone (the broker is).
type Ports struct{}

// LocalPorts is Linux's alone.
func LocalPorts() Ports { return Ports{} }

// Bind fails: Linux's alone.
func (Ports) Bind(network string, c syscall.RawConn) error { return errors.ErrUnsupported }
