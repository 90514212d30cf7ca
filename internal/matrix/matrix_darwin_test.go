package matrix

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestEscapeMatrixSeatbelt runs every case of egress-cases.json under
// Seatbelt with its positive control, as TestEscapeMatrix does under bwrap.
// An escape the matrix does not expect of seatbelt on darwin fails; an
// escape it expects (no PID namespace) is logged as the known gap it is; a
// hold where it expects an escape fails too, because then the matrix is
// wrong. scripts/test-macos.sh runs it; it has not been run on a Mac yet.
func TestEscapeMatrixSeatbelt(t *testing.T) {
	if _, err := os.Stat("/usr/bin/sandbox-exec"); err != nil {
		sandboxtest.Unavailable(t, "/usr/bin/sandbox-exec", "run on macOS, which ships it")
	}
	cases, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	results, err := Run(ctx, cases, RunOptions{Binary: bin, Mechanism: "seatbelt"})
	if err != nil {
		sandboxtest.Unavailable(t, "the escape matrix's canaries", err.Error())
	}
	counts := map[string]int{}
	for _, r := range results {
		counts[r.Verdict]++
		t.Run(r.ID, func(t *testing.T) {
			switch {
			case r.Verdict == Escaped && r.Expected == ExpectEscaped:
				t.Logf("ESCAPED, a known gap of seatbelt (%s): %s", r.ExpectedWhy, r.Reason)
			case r.Verdict == Escaped:
				t.Errorf("ESCAPED under seatbelt (expected %s): %s\ncontrol: %q\nconfined: %q", r.Expected, r.Reason, r.Control, r.Confined)
			case r.Error:
				t.Errorf("could not run: %s\ncontrol: %q\nconfined: %q", r.Reason, r.Control, r.Confined)
			case r.Unexpected():
				t.Errorf("%s, but the matrix expects %s: %s", r.Verdict, r.Expected, r.Reason)
			default:
				t.Logf("%s: %s", r.Verdict, r.Reason)
			}
		})
	}
	t.Logf("as %s: %d held, %d ESCAPED, %d untested, %d n/a in %v", sandboxtest.CurrentUser(),
		counts[Held], counts[Escaped], counts[Untested], counts[NA], time.Since(start).Round(time.Millisecond))
	if counts[Held] == 0 {
		t.Errorf("nothing held: the matrix proved nothing on this machine")
	}
	assertNothingLeft(t)
}
