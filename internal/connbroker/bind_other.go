//go:build !linux

package connbroker

import (
	"errors"
	"syscall"
)

// BindPort is Linux's alone (the broker is): elsewhere it fails.
func BindPort(network string, c syscall.RawConn) error { return errors.ErrUnsupported }
