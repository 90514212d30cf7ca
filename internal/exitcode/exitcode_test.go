package exitcode

import "testing"

// TestSignal holds the 128+N mapping both ways and its bounds: 128 itself
// (git's fatal errors) and statuses above 128+64 are a command's own.
func TestSignal(t *testing.T) {
	for sig := 1; sig <= maxSignal; sig++ {
		if got, ok := Signal(OfSignal(sig)); !ok || got != sig {
			t.Errorf("Signal(OfSignal(%d)) = %d, %v", sig, got, ok)
		}
	}
	for _, code := range []int{0, 1, Timeout, Setup, NotExecutable, NotFound, 128, 128 + maxSignal + 1, 255} {
		if sig, ok := Signal(code); ok {
			t.Errorf("Signal(%d) = %d, true; want a command's own status", code, sig)
		}
	}
}
