package check

import (
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/matrix"
)

func TestTier(t *testing.T) {
	ok := func(id, cat string) Item { return Item{ID: id, Category: cat, Status: StatusOK, Summary: "held: x"} }
	items := []Item{ok("bwrap", "bwrap"), {ID: "advisory/x", Status: StatusWarn}, ok("matrix/a", "self-test/fs"), {ID: "matrix/b", Category: "self-test/fs", Status: StatusUntested, Summary: "untested: x"}}
	if n, v := tier(items, true, "bwrap"); n != 1 {
		t.Errorf("tier %d (%s), want 1: a warning and an untested case beside a held one", n, v)
	}
	if n, _ := tier(append(items, Item{ID: "matrix/c", Category: "self-test/net", Status: StatusFail, Summary: "ESCAPED: x"}), true, "bwrap"); n != 0 {
		t.Errorf("an escape left tier %d", n)
	}
	if n, _ := tier(append(items, Item{ID: "matrix/d", Category: "self-test/proc", Status: StatusUntested, Summary: "untested: x"}), true, "bwrap"); n != 0 {
		t.Errorf("a group where nothing could be tested left tier %d", n)
	}
	if n, _ := tier(items, false, "none"); n != 0 {
		t.Errorf("no sandbox, yet tier %d", n)
	}
	// A held case with untested attempts keeps tier 1, and the verdict
	// counts them.
	partly := ok("matrix/e", "self-test/net")
	partly.UntestedAttempts = 2
	if n, v := tier(append(items, partly), true, "bwrap"); n != 1 || !strings.Contains(v, "1 untested and 2 untested attempts in held cases") {
		t.Errorf("tier %d, verdict %q: want tier 1 counting 1 untested case and 2 untested attempts", n, v)
	}
	// A group of only n/a cases (the host-kernel group under gVisor) is
	// not a group that ran; one n/a beside an untested case does not make
	// an untested group pass.
	na := Item{ID: "matrix/e", Category: "self-test/kernel", Status: StatusOK, Summary: matrix.NA + ": x"}
	if n, v := tier(append(items, na), true, "gvisor"); n != 1 {
		t.Errorf("an all-n/a group left tier %d (%s)", n, v)
	}
	if n, _ := tier(append(items, na, Item{ID: "matrix/f", Category: "self-test/kernel", Status: StatusUntested, Summary: "untested: x"}), true, "gvisor"); n != 0 {
		t.Errorf("an untested case beside an n/a one left tier %d", n)
	}
}

// TestKnownGap: an escape the matrix expects of the mechanism is a
// warning, not a failure, and does not count as testing its group; an
// escape it does not expect still fails.
func TestKnownGap(t *testing.T) {
	gap := resultItem(matrix.Result{ID: "life-setsid", Group: "lifecycle", Verdict: matrix.Escaped, Expected: matrix.ExpectEscaped,
		ExpectedWhy: "no PID namespace", Reason: "reached confined: survivors"})
	if gap.Status != StatusWarn || !strings.HasPrefix(gap.Summary, "ESCAPED") || !strings.Contains(gap.Remediation, "no PID namespace") {
		t.Errorf("known gap = %+v", gap)
	}
	if it := resultItem(matrix.Result{ID: "fs-read-abs", Group: "fs", Verdict: matrix.Escaped, Expected: matrix.ExpectHeld}); it.Status != StatusFail {
		t.Errorf("an unexpected escape is %s, want fail", it.Status)
	}
	ok := Item{ID: "matrix/a", Category: "self-test/fs", Status: StatusOK, Summary: "held: x"}
	if n, v := tier([]Item{ok, gap}, true, "seatbelt"); n != 1 {
		t.Errorf("a known gap beside a held group: tier %d (%s), want 1", n, v)
	}
	lone := Item{ID: "matrix/b", Category: "self-test/lifecycle", Status: StatusUntested, Summary: "untested: x"}
	if n, _ := tier([]Item{ok, gap, lone}, true, "seatbelt"); n != 0 {
		t.Errorf("a group with only a known gap and an untested case: tier %d, want 0", n)
	}
}
