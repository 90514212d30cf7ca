//go:build linux && !amd64

package probe

// archFamilies: only x86_64 has rules of its own.
func archFamilies() map[string][]sysCall { return nil }

// abiAttempts: no foreign ABI to try off x86_64 (aarch64's compat ABI is
// not reachable from a 64-bit process without a 32-bit binary).
func abiAttempts() []string { return nil }

func abiCall(string) {}
