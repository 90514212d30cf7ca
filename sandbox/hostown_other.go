//go:build !darwin && !linux

package sandbox

// hostOwn is nil where sandbox-run cannot sandbox: policy.Host then
// accepts any directory in /tmp (only the shared places themselves are
// refused).
func hostOwn(int) func(string) error { return nil }
