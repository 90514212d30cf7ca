package sandbox

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

// Bounds of the walk that finds git directories in the writable
// directories (walkBounds' defaults): entries listed and levels below a
// writable directory. Past one the walk stops and says so (WalkReport:
// Complete false, Skipped naming what was not walked): at a run's start a
// repository beyond is not held (a note says so); in the sweep after a run
// it is not neutralised, and the run exits 125 (see
// pendingProtection.finish). Both are counts, not a clock, so that the
// same tree gives the same answer on a loaded machine.
const (
	walkMaxEntries = 200_000
	walkMaxDepth   = 64
)

// protectHooks are what in-package tests change of a run's protection:
// smaller walk bounds than 200,000 files, and the live guard off, to test
// the sweep after the run alone.
type protectHooks struct {
	bounds  walkBounds
	noGuard bool
}

// walkBounds bounds one walk; a zero field is its default above. Tests set
// small ones (Options.walk) instead of making 200,000 files.
type walkBounds struct {
	entries, depth int
}

// orDefault is b with each zero field set to its default.
func (b walkBounds) orDefault() walkBounds {
	if b.entries <= 0 {
		b.entries = walkMaxEntries
	}
	if b.depth <= 0 {
		b.depth = walkMaxDepth
	}
	return b
}
