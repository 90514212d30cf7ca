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
	GitDirs int `json:"git_dirs"`
	// Micros is how long the walk took, in microseconds.
	Micros int64 `json:"micros"`
	// Complete is false when the walk left something out (a bound, a
	// directory it could not list); Skipped says what and why.
	Complete bool     `json:"complete"`
	Skipped  []string `json:"skipped,omitempty"`
}

// Quarantined is one thing a command created where a protected path was
// missing, moved out of the user's tree once no run on that directory was
// left (or, for a new git directory's config, rewritten without the
// settings that run a program; the original is what was moved).
type Quarantined struct {
	// Path is where the thing was, absolute.
	Path string `json:"path"`
	// To is where it was moved in sandbox-run's quarantine; "" when it
	// was removed or rewritten in place (Why says which).
	To string `json:"to"`
	// Why says why it was taken out of the user's tree.
	Why string `json:"why"`
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

// LiveGuardReport is the live guard of a Linux run (bwrap, gvisor,
// landlock): the host-side watcher that neutralises, while the run lasts,
// a protected path created where one was missing and a git directory's
// program-running settings (docs/protected-paths.md, "The live window").
type LiveGuardReport struct {
	// Started says whether the guard ran; false (with Lost saying why)
	// means the live window was open for the whole run.
	Started bool `json:"started"`
	// Watches is how many inotify watches it held at the end; Budget is
	// the run's ceiling on them.
	Watches int `json:"watches"`
	Budget  int `json:"budget"`
	// ReadyMicros is the time from the guard's start until its first pass
	// had watched every directory it found; 0 when the run ended first.
	// Until then, what the command made in a directory not yet reached
	// waited for the pass.
	ReadyMicros int64 `json:"ready_micros"`
	// Complete is false when a directory went unwatched (the budget, the
	// user's inotify limits); Lost says why (the first few causes) and
	// Unwatched counts them. What was not watched is neutralised only
	// when the run settles.
	Complete  bool     `json:"complete"`
	Lost      []string `json:"lost,omitempty"`
	Unwatched int      `json:"unwatched,omitempty"`
	// Overflows counts the kernel's event-queue overflows, after each of
	// which the guard looked at every directory again.
	Overflows int `json:"overflows,omitempty"`
	// Neutralised counts what it moved or stripped while the run lasted
	// (each also in Quarantined and the audit's live_quarantine events).
	Neutralised int `json:"neutralised"`
}
