package sandbox

import "fmt"

// WalkReport says what the start-up walk of the writable directories
// looked at, what it found and what it skipped, and why.
type WalkReport struct {
	Dirs     int      `json:"dirs"`
	Entries  int      `json:"entries"`
	GitDirs  int      `json:"git_dirs"`
	Micros   int64    `json:"micros"`
	Complete bool     `json:"complete"`
	Skipped  []string `json:"skipped,omitempty"`
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
