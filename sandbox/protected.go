package sandbox

import "fmt"

// WalkReport says what a walk of the writable directories for git
// directories (at the run's start: protect_walk; after it: sweep) looked
// at, what it found and what it skipped, and why.
type WalkReport struct {
	// Dirs and Entries are the directories listed and the entries read.
	Dirs    int `json:"dirs"`
	Entries int `json:"entries"`
	// GitDirs counts the git and common directories found inside the
	// writable directories.
	GitDirs int   `json:"git_dirs"`
	Micros  int64 `json:"micros"`
	// Complete is false when the walk left something out (a bound, a
	// directory it could not list); Skipped says what and why.
	Complete bool     `json:"complete"`
	Skipped  []string `json:"skipped,omitempty"`
}

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

// Quarantined is one thing a command created where a protected path was
// missing, moved out of the user's tree once no run on that directory was
// left (or, for a new git directory's config, rewritten without the
// settings that run a program; the original is what was moved).
type Quarantined struct {
	Path string `json:"path"`
	To   string `json:"to"`
	Why  string `json:"why"`
	// Run is the run during which the path was missing at start.
	Run string `json:"run"`
}

// Line is the one line sandbox-run prints on stderr for q.
func (q Quarantined) Line() string {
	if q.To == "" {
		return fmt.Sprintf("sandbox-run: quarantined %s: %s", q.Path, q.Why)
	}
	return fmt.Sprintf("sandbox-run: quarantined %s: %s; moved to %s", q.Path, q.Why, q.To)
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

// walkBounds bounds one walk; a zero field is its default above. Tests set
// small ones (Options.walk) instead of making 200,000 files.
type walkBounds struct {
	entries, depth int
}

func (b walkBounds) orDefault() walkBounds {
	if b.entries <= 0 {
		b.entries = walkMaxEntries
	}
	if b.depth <= 0 {
		b.depth = walkMaxDepth
	}
	return b
}
