package limits

import "testing"

// TestOOMScoreReadBack: OOMScore reads this process's own oom_score_adj
// from /proc, a value in the kernel's range (Linux only: elsewhere it is
// ErrUnsupported by design).
func TestOOMScoreReadBack(t *testing.T) {
	v, err := OOMScore(0)
	if err != nil || v < -1000 || v > 1000 {
		t.Fatalf("OOMScore(self) = %d, %v", v, err)
	}
}
