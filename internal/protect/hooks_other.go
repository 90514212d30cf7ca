//go:build !linux

package protect

// Hooks has nothing to tune where no mechanism protects paths by
// walking the writable directories.
type Hooks struct{}
