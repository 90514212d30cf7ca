package protect

import (
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/report"
)

// mergeWalks adds b to a (either may be nil): the report of several walks
// is complete when each is.
func mergeWalks(a, b *report.WalkReport) *report.WalkReport {
	if b == nil {
		return a
	}
	if a == nil {
		c := *b
		c.Skipped = append([]string(nil), b.Skipped...)
		return &c
	}
	a.Dirs += b.Dirs
	a.Entries += b.Entries
	a.GitDirs += b.GitDirs
	a.Micros += b.Micros
	a.Complete = a.Complete && b.Complete
	a.Skipped = append(a.Skipped, b.Skipped...)
	return a
}

// The walk that finds git directories in the writable directories is
// bounded (hostwalk.Bounds, by default hostwalk.MaxEntries entries and
// hostwalk.MaxDepth levels). Past one the walk stops and says so
// (WalkReport: Complete false, Skipped naming what was not walked): at a
// run's start a repository beyond is not held (a note says so); in the
// sweep after a run it is not neutralised, and the run exits 125 (see
// Pending.Finish).

// Hooks are what tests change of a run's protection: smaller walk bounds
// than 200,000 files, and the live guard off, to test the sweep after the
// run alone. The zero value is a real run's.
type Hooks struct {
	Bounds  hostwalk.Bounds // bounds of the sweeps' walks (zero: hostwalk's defaults)
	NoGuard bool            // start no live guard (the report says it was turned off)
}
