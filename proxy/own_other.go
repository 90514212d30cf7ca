//go:build !linux

package proxy

import (
	"errors"
	"os"
)

// openAddrEvents fails where there is no netlink to say when the
// interfaces changed: ownWatch then lists them at every call.
func openAddrEvents() (*os.File, error) {
	return nil, errors.New("no address change events on this system")
}

func drainAddrEvents(*os.File, []byte) bool { return true }
