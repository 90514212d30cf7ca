package sandbox

import "github.com/sandbox-run/sandbox-run/internal/hostwalk"

// mergeWalks adds b to a (either may be nil): the report of several walks
// is complete when each is.
func mergeWalks(a, b *WalkReport) *WalkReport {
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
// pendingProtection.finish).

// protectHooks are what in-package tests change of a run's protection:
// smaller walk bounds than 200,000 files, and the live guard off, to test
// the sweep after the run alone.
type protectHooks struct {
	bounds  hostwalk.Bounds
	noGuard bool
}
