//go:build linux && !amd64

package check

// archFamilies: only x86_64 has rules of its own.
func archFamilies() map[string][]sysCall { return nil }
