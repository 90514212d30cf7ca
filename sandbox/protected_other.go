//go:build !linux

package sandbox

// protectHooks has nothing to tune where no mechanism protects paths by
// walking the writable directories.
type protectHooks struct{}
