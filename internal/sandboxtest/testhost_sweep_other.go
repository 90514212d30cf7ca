//go:build !linux

package sandboxtest

// sweepTestHosts has nothing to sweep: test hosts are Linux network
// namespaces.
func sweepTestHosts(func(...string) error) {}
