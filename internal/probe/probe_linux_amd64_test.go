package probe

import "testing"

// TestAbiAttempt: unconfined, an x32 call returns (the kernel answers it,
// ENOSYS without x32 support), and int $0x80 either returns (the i386
// gate ran getpid) or, on a kernel without the gate, faults and is
// reported as abiFaulted: never Go's own crash, which the foreign-abi
// probe would misread.
func TestAbiAttempt(t *testing.T) {
	if got := abiAttempt("x32"); got != 0 {
		t.Errorf("x32: %d, want 0 (the call returned)", got)
	}
	switch got := abiAttempt("int80"); got {
	case 0:
		t.Log("int $0x80 entered the kernel here (the i386 gate)")
	case abiFaulted:
		t.Log("int $0x80 faulted here: this kernel has no i386 gate")
	default:
		t.Errorf("int80: %d, want 0 or %d", got, abiFaulted)
	}
}
