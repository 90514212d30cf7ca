package protect

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/audit"
	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// State is what a run's plan knows of its protected paths: what was
// held, what was missing (watched), which git directories and .git files
// existed at start, and the walk that found them. A run's journal records
// it, so that whatever the command created where nothing could be held is
// neutralised once the last run on the directory has ended.
//
// Guarantees: nothing is created in the user's tree (no placeholder, no
// mount point: only existing paths are bound onto themselves). Existing
// protected paths and the held parts of every git directory found are
// read-only for the whole run. Non-guarantees: a missing protected path is
// writable while the run lasts (the live window) and is neutralised
// afterwards; a git directory past the walk's bounds is not held.
type State struct {
	Watched []string // protected paths missing at start
	Gits    []GitID  // git directories, .git files and .git links at start
	Walk    report.WalkReport
	// Held and SnapDir: existing protected paths kept as snapshots, by a
	// mechanism that cannot hold them read-only (landlock).
	Held    []HeldCopy
	SnapDir string
}

// Found is what the layout reads of the walk for git directories, besides
// the kind of each path (Acts' kindOf): the git directories, .git files
// and .git links found, and the targets of the links met (for the
// refusals' wording; a link missing from Links is named with an empty
// target). It guarantees nothing by itself: the caller fills it from one
// walk (hostwalk.FindGit) so that it and kindOf agree.
type Found struct {
	// Own are sandbox-run's state dirs among the writable ones, whose
	// protected names are not held (see SplitOwn).
	Own               []string
	GitDirs, GitFiles []string
	GitLinks          []string
	Links             map[string]string
}

// SplitOwn divides the writable directories into those whose protected
// names (.bashrc, .npmrc, .mcp.json, ...) are held, watched and
// neutralised, and sandbox-run's own state dirs among them (own: sessions'
// homes, shared caches), whose names are not. No host tool reads those
// names there: the dirs lie 0700 in sandbox-run's data directory, which no
// workdir or --write may expose, and what reads them is later runs of the
// same session or sandbox uid, as trusted as the run that wrote them (a
// poisoned .bashrc there reaches those runs, as a poisoned cache entry
// does). Git directories in them are still found, held and stripped: a
// link from the workdir into a session's home would otherwise hand host
// git a repository the command configured. A --home DIR is the caller's
// own directory, which host tools may read, and stays protected.
func SplitOwn(writable, ownDirs []string) (named, own []string) {
	for _, w := range writable {
		if slices.Contains(ownDirs, w) {
			own = append(own, w)
		} else {
			named = append(named, w)
		}
	}
	return named, own
}

// Acts refuses a protected path outside every writable dir and a .git
// that is a symbolic link, and lays out the protected paths of p (see
// protectLayout; names only outside sandbox-run's own dirs, SplitOwn)
// with kindOf, which must not follow links. It is pure when kindOf is:
// the same inputs give the same actions, a directory before what lies
// below it and nothing below a held path. Every refusal is a *fault.Error
// (what, why, fix). It guarantees nothing about the host: the actions are
// true of the moment kindOf looked, and binding them is the caller's.
func Acts(p policy.Policy, writable []string, pf Found, kindOf func(string) hostwalk.Kind) ([]Action, error) {
	named, own := SplitOwn(writable, pf.Own)
	for _, name := range p.Protect {
		if filepath.IsAbs(name) && !policy.InsideAny(name, named) {
			why := "not inside a writable directory"
			if policy.InsideAny(name, own) {
				why = "it lies in a session's home or a shared cache, whose protected names sandbox-run does not hold (its own state, read by no host tool)"
			}
			return nil, fault.New("--protect "+name, why, "protect paths inside --workdir, a --write dir or a --home DIR")
		}
	}
	for _, l := range pf.GitLinks {
		t := pf.Links[l]
		return nil, fault.New("git directory "+l+" is a symbolic link (to "+t+")",
			"git follows it, and a link cannot be held read-only in place",
			"replace the link with the directory it names, or with a file holding \"gitdir: "+t+"\"")
	}
	acts, err := layoutSplit(named, own, p.ProtectedNames(), pf.GitDirs, pf.GitFiles, kindOf)
	var le *LinkError
	if errors.As(err, &le) {
		t := pf.Links[le.Path]
		return nil, fault.New("protected path "+le.Path+" is a symbolic link (to "+t+")",
			"a link there would make the sandbox or a later tool follow it", "remove the link (rm "+le.Path+") or replace it with the real file")
	}
	if err != nil {
		return nil, fault.New("cannot lay out the protected paths", err.Error(), "check the writable directories")
	}
	return acts, nil
}

// layoutSplit is protectLayout with names laid out in named only and git
// directories and .git files in whichever of named and own holds them.
// The two sets of actions concern disjoint trees (no writable directory
// lies in sandbox-run's state, nor holds it), so bwrap may mount one set
// after the other.
func layoutSplit(named, own, names, gitDirs, gitFiles []string, kindOf func(string) hostwalk.Kind) ([]Action, error) {
	if len(own) == 0 {
		return protectLayout(named, names, gitDirs, gitFiles, kindOf)
	}
	var dirs, files [2][]string
	for _, d := range gitDirs {
		i := 0
		if policy.InsideAny(d, own) {
			i = 1
		}
		dirs[i] = append(dirs[i], d)
	}
	for _, f := range gitFiles {
		i := 0
		if policy.InsideAny(f, own) {
			i = 1
		}
		files[i] = append(files[i], f)
	}
	acts, err := protectLayout(named, names, dirs[0], files[0], kindOf)
	if err != nil {
		return nil, err
	}
	more, err := protectLayout(own, nil, dirs[1], files[1], kindOf)
	return append(acts, more...), err
}

// Pending is a started run's side of its journal: what its start
// quarantined of earlier runs (Started), and how it settles at its end
// (Finish). Its methods are for the goroutine that runs the run.
type Pending struct {
	jdir, jpath string
	cache       string
	runID       string
	own         *journal // the run's state when it keeps no journal
	started     []report.Quarantined
	finished    bool // finish ran: the run's end was settled
	// guard is the live guard (liveguard_linux.go), nil when it could not
	// start (guardLost says why); guardTmp: its quarantine is a temporary
	// directory (no cache), removed when it stayed empty.
	guard     *liveGuard
	guardQ    *quarantine
	guardLost string
	guardTmp  bool
	// bounds bound the sweeps' walks; sweep is what the sweeps at the
	// run's start (of ended runs) walked, nil when there were none.
	bounds  hostwalk.Bounds
	sweep   *report.WalkReport
	noGuard bool // Hooks.NoGuard
	// me is this process as the run's journal names it, read once for
	// the journal and both settles.
	me self
	// release releases the lock that marks the run's journal live
	// (holdJournal), once the run has settled; nil without a journal.
	release func()
	// dryUndo, set for a dry run, undoes its set-up at finish: a dry run
	// keeps no journal, settles nothing and starts no guard.
	dryUndo func()
}

// Start is how any mechanism starts its run's protection: under the journal
// lock it settles ended runs (their sweeps bounded by h), sets the run up
// through mk (its writable directories, its protection and how to undo
// the set-up) and records the run's journal; then it starts the live
// guard, whose neutralisations go to audit as they happen.
//
// A dry run (dry) only sets the run up through mk: it takes no lock,
// settles no journal, writes none and starts no guard, since no command
// runs to write anything; so it changes nothing in the writable
// directories (what ended runs left there waits for the next real run).
// Its Finish only undoes mk's set-up.
//
// Guarantees: no run starts on a path another run is quarantining (the
// lock, bounded at lockWait); a journal, once written, names what the
// run's end or a later run neutralises. Non-guarantees: without a cache
// (cache "") there is no journal, and what the command left behind is
// neutralised by the run's own Finish only; a process killed before
// Finish leaves it to the next run of the same user. Errors are
// *fault.Error.
func Start(cache, runID string, dry bool, aw io.Writer, h Hooks, mk func() ([]string, State, func(), error)) (*Pending, error) {
	pend := &Pending{cache: cache, runID: runID, jdir: journalDir(cache), bounds: h.Bounds, noGuard: h.NoGuard}
	if dry {
		_, _, undo, err := mk()
		if err != nil {
			return nil, err
		}
		pend.dryUndo = undo
		return pend, nil
	}
	if pend.jdir == "" {
		writable, pr, _, err := mk()
		if err != nil {
			return nil, err
		}
		pend.own = &journal{RunID: runID, Writable: writable, Watched: pr.Watched, Gits: pr.Gits, Held: pr.Held, SnapshotDir: pr.SnapDir}
		pend.startGuard(writable, pr, aw)
		return pend, nil
	}
	jd, unlock, err := lockJournals(pend.jdir)
	if err != nil {
		return nil, fault.New("cannot lock the run journals in "+pend.jdir, err.Error(),
			"make the cache directory ($XDG_CACHE_HOME, else ~/.cache) your own, writable and reached without a symbolic link, or point XDG_CACHE_HOME at one that is")
	}
	defer unlock()
	q := pend.quarantine()
	settleIn(jd, pend.jdir, "", &pend.me, q)
	settleJournals(legacyJournalDir(cache), "", q)
	pend.started, pend.sweep = q.items, q.sweep
	writable, pr, undo, err := mk()
	if err != nil {
		return nil, err
	}
	j, err := newJournal(runID, &pend.me, writable, pr)
	if err == nil {
		pend.jpath, pend.release, err = writeHeldJournal(jd, pend.jdir, j)
	}
	if err != nil {
		undo()
		return nil, fault.New("cannot record the run's protected paths in "+pend.jdir, err.Error(), "check that the cache directory is writable")
	}
	pend.startGuard(writable, pr, aw)
	return pend, nil
}

// startGuard starts the live guard over the run's writable directories,
// with a quarantine of its own (the run's, or a temporary directory when
// there is no cache). A guard that cannot start is recorded as lost, in
// the report and the audit, and the run goes on: its end still settles.
func (pend *Pending) startGuard(writable []string, pr State, aw io.Writer) {
	if pend.noGuard {
		pend.guardLost = "turned off by the test"
		return
	}
	q := pend.quarantine()
	q.run = pend.runID
	if q.dir == "" {
		d, err := os.MkdirTemp("", "sandbox-run-quarantine-")
		if err != nil {
			pend.guardLost = "no quarantine directory: " + err.Error()
			audit.Event(aw, pend.runID, "live_guard_incomplete", map[string]any{"why": pend.guardLost})
			return
		}
		q.dir, pend.guardTmp = d, true
	}
	g, err := startLiveGuard(writable, pr.Watched, pr.Gits, q, aw, pend.runID, 0)
	if err != nil {
		pend.guardLost = err.Error()
		audit.Event(aw, pend.runID, "live_guard_incomplete", map[string]any{"why": pend.guardLost})
		return
	}
	pend.guard, pend.guardQ = g, q
}

// stopGuard stops the live guard and returns its report and what it
// quarantined.
func (pend *Pending) stopGuard() (report.LiveGuardReport, []report.Quarantined) {
	if pend.guard == nil {
		return report.LiveGuardReport{Lost: []string{pend.guardLost}}, nil
	}
	rep := pend.guard.stop()
	rep.Started = true
	items := pend.guardQ.items
	if pend.guardTmp && len(items) == 0 {
		os.Remove(pend.guardQ.dir)
	}
	return rep, items
}

func (pend *Pending) quarantine() *quarantine {
	if pend.cache != "" {
		return &quarantine{dir: filepath.Join(pend.cache, "quarantine", pend.runID), bounds: pend.bounds}
	}
	return &quarantine{bounds: pend.bounds}
}

// Started is what the run's start neutralised of ended runs (before the
// command ran), for the report's quarantined list; nil for a dry run.
func (pend *Pending) Started() []report.Quarantined { return pend.started }

// Finish settles the run's journal (and those of ended runs that waited
// for it) once the command and its descendants are gone, adds what was
// quarantined and the live guard's report to rep (nil: the command never
// ran; code is then nil too, else the run's exit status, which an
// incomplete sweep replaces) and prints one line per item on stderr (nil: none).
// An incomplete sweep makes the run's outcome exit 125, class
// report.ClassSweepIncomplete. It runs once; later calls do nothing.
// Without the journal lock it settles nothing and warns: the next run
// neutralises what this one left.
func (pend *Pending) Finish(rep *report.Report, code *int, stderr *os.File) {
	if pend.finished {
		return
	}
	pend.finished = true
	if pend.dryUndo != nil {
		pend.dryUndo()
		return
	}
	if pend.release != nil {
		// After the settle below (or its failure): the run is over.
		defer pend.release()
	}
	// The guard stops first: from here on the settle alone acts.
	guard, live := pend.stopGuard()
	q := pend.quarantine()
	q.items = live
	switch {
	case pend.own != nil:
		d, err := os.MkdirTemp("", "sandbox-run-quarantine-")
		if err != nil {
			return
		}
		q.dir, q.made = d, true
		n := len(q.items)
		q.neutralise(pend.own, q.walk(pend.own.Writable))
		if len(q.items) == n {
			os.Remove(d)
		}
	default:
		jd, unlock, err := lockJournals(pend.jdir)
		if err != nil {
			if stderr != nil {
				fmt.Fprintf(stderr, "sandbox-run: warning: cannot lock %s (%v): what this run created at missing protected paths is neutralised by the next run\n", pend.jdir, err)
			}
			return
		}
		settleIn(jd, pend.jdir, pend.jpath, &pend.me, q)
		unlock()
	}
	if rep != nil {
		rep.Quarantined = append(rep.Quarantined, q.items...)
		rep.LiveGuard = &guard
	}
	if stderr != nil {
		for _, it := range q.items {
			fmt.Fprintln(stderr, it.Line())
		}
		if !guard.Complete && !pend.noGuard {
			fmt.Fprintf(stderr, "sandbox-run: warning: the live guard did not watch everything while the run lasted (%s); what the command made there was neutralised only now\n", strings.Join(guard.Lost, "; "))
		}
	}
	pend.sweep = mergeWalks(pend.sweep, q.sweep)
	pend.failClosed(rep, code, stderr)
}

// failClosed makes an incomplete sweep the run's outcome: a repository
// past the walk's bounds kept what the command wrote to its config and
// hooks, which the host's next git there would run. The report's sweep
// says what was not walked; the run exits ExitSetup (125) with the class
// ClassSweepIncomplete, whatever the command's own status (named in the
// reason), and one line on stderr says what, why and what to do.
func (pend *Pending) failClosed(rep *report.Report, code *int, stderr *os.File) {
	s := pend.sweep
	if s == nil {
		return
	}
	if rep != nil {
		rep.Sweep = s
	}
	if s.Complete {
		return
	}
	shown := s.Skipped
	if len(shown) > 2 {
		shown = append(shown[:2:2], fmt.Sprintf("%d more in the report's sweep", len(s.Skipped)-2))
	}
	what := "the sweep for git directories after the run is incomplete (" + strings.Join(shown, "; ") + ")"
	why := "a repository beyond it was not neutralised: a host git run there may run a program the command put in its config or hooks"
	fix := "check the repositories below the writable directories before running git there (git -c core.fsmonitor=false -c core.hooksPath=/dev/null ...), and keep them under " + strconv.Itoa(pend.bounds.OrDefault().Entries) + " entries"
	if stderr != nil {
		fmt.Fprintln(stderr, "sandbox-run: "+what+": "+why+"; fix: "+fix)
	}
	if rep != nil && code != nil {
		reason := what + "; the command's own exit status was " + strconv.Itoa(*code)
		*code = exitcode.Setup
		rep.Exit = &report.Exit{Code: exitcode.Setup, Class: report.ClassSweepIncomplete, Reason: reason}
	}
}
