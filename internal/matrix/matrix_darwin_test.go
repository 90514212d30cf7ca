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
	judgeColumn(t, "seatbelt", results, start)
}
