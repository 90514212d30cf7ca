package seatbelt

import (
	"slices"

	"github.com/sandbox-run/sandbox-run/internal/plan"
	sbpl "github.com/sandbox-run/sandbox-run/seatbelt"
)

// grants is the run's plan as the profile's grants: its writable dirs
// and --read paths, and its protected paths, held and watched alike (a
// profile denies by path whether a path exists or not).
func grants(ps plan.Paths, ptrace bool) sbpl.Grants {
	return sbpl.Grants{Writable: ps.Writable, Read: ps.ReadOnly, Protected: protected(ps), Ptrace: ptrace}
}

// protected is every protected path of the plan, held first.
func protected(ps plan.Paths) []string {
	return append(slices.Clone(ps.Protected), ps.Watched...)
}
