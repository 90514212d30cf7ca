package matrix

import (
	"context"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/landlock"
)

// TestEscapeMatrix runs every case of egress-cases.json under bwrap with
// its positive control. An escape fails unless the matrix expects it (a
// documented window, such as a missing protected path while the run
// lasts); so does an attempt the runner
// could not run. An attempt whose control could not reach its canary on
// this machine is untested and logged with the reason, never held.
func TestEscapeMatrix(t *testing.T) {
	sandboxtest.Bwrap(t)
	cases, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	results, err := Run(ctx, cases, RunOptions{Binary: bin})
	if err != nil {
		sandboxtest.Unavailable(t, "the escape matrix's canaries", err.Error())
	}
	judgeColumn(t, "bwrap", results, start)
}

// TestEscapeMatrixTierZero runs the matrix with --sandbox off, to check
// the "none" column: a case the matrix says tier 0 holds must hold. (A
// hold where it expects an escape is only logged: unconfined, what an
// attempt reaches depends on the user running it.)
func TestEscapeMatrixTierZero(t *testing.T) {
	sandboxtest.Bwrap(t)
	if testing.Short() {
		t.Skip("the tier-0 column is not run with -short")
	}
	cases, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	results, err := Run(ctx, cases, RunOptions{Binary: bin, Mechanism: "none"})
	if err != nil {
		sandboxtest.Unavailable(t, "the escape matrix's canaries", err.Error())
	}
	for _, r := range results {
		switch {
		case r.Error:
			t.Errorf("%s: could not run: %s", r.ID, r.Reason)
		case r.Verdict == Escaped && r.Expected != ExpectEscaped:
			t.Errorf("%s: the matrix expects tier 0 to be %s, but the attempt got through: %s", r.ID, r.Expected, r.Reason)
		case r.Verdict == Held && r.Expected == ExpectEscaped:
			t.Logf("%s: held at tier 0 for %s, where the matrix expects an escape: %s", r.ID, sandboxtest.CurrentUser(), r.Reason)
		}
	}
	assertNothingLeft(t)
}

// TestEscapeMatrixLandlock runs every case under --sandbox landlock with
// its positive control: a case the landlock column holds must hold; one
// it expects to escape is a named loss (see docs/landlock.md), logged; any
// other outcome against the column fails.
func TestEscapeMatrixLandlock(t *testing.T) {
	sandboxtest.Landlock(t, landlock.MinABI)
	cases, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	results, err := Run(ctx, cases, RunOptions{Binary: bin, Mechanism: "landlock"})
	if err != nil {
		sandboxtest.Unavailable(t, "the escape matrix's canaries", err.Error())
	}
	judgeColumn(t, "landlock", results, start)
}

// TestEscapeMatrixGvisor runs every case under --sandbox gvisor (tier 2)
// with its positive control: the gvisor column. An escape the column does
// not declare fails, as does an outcome other than the one it expects.
func TestEscapeMatrixGvisor(t *testing.T) {
	sandboxtest.Runsc(t)
	cases, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	start := time.Now()
	// gVisor's start-up is heavier than bwrap's: fewer at once.
	results, err := Run(ctx, cases, RunOptions{Binary: bin, Mechanism: "gvisor", Parallel: 3, CaseTimeout: 40 * time.Second})
	if err != nil {
		sandboxtest.Unavailable(t, "the escape matrix's canaries", err.Error())
	}
	judgeColumn(t, "gvisor", results, start)
}
