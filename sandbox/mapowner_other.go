//go:build !linux

package sandbox

// lendsOwner reports whether m honours --map-owner: only bwrap on Linux.
func lendsOwner(mechanism) bool { return false }
