package sandbox

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
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// protection is what a run's plan knows of its protected paths: what was
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
type protection struct {
	watched []string // protected paths missing at start
	gits    []gitID  // git directories, .git files and .git links at start
	walk    WalkReport
	// held and snapDir: existing protected paths kept as snapshots, by a
	// mechanism that cannot hold them read-only (landlock).
	held    []heldCopy
	snapDir string
}

// gatherProtect gathers what the protect layout needs: the git
// directories, .git files and .git links under the writable dirs (the
// walk), the kind of every path the layout asks about (recorded as it
// asks, never following a link) and the resolution of every path it binds
// onto itself, vetted like any bind destination.
func (f *hostFacts) gatherProtect(p policy.Policy, g *pathguard.Guard, writable []string, tops hostwalk.Tops) error {
	finds := hostwalk.FindGitFrom(writable, hostwalk.Bounds{}, tops)
	pf := &f.prot
	pf.gitDirs, pf.gitFiles, pf.gitLinks, pf.walk = finds.Dirs, finds.Files, finds.Links, finds.Report
	pf.kinds, pf.links, pf.self = map[string]hostwalk.Kind{}, map[string]string{}, map[string]pathguard.Resolution{}
	for _, l := range finds.Links {
		pf.links[l], _ = os.Readlink(l)
	}
	var ks hostwalk.Kinds
	for dir, ents := range finds.Tops {
		ks.Seed(dir, ents) // the writable dirs, listed once for both
	}
	record := func(p string) hostwalk.Kind {
		k := ks.Kind(p)
		pf.kinds[p] = k
		if k == hostwalk.KindLink {
			pf.links[p], _ = os.Readlink(p)
		}
		return k
	}
	acts, err := protectActs(p, writable, *pf, record)
	if err != nil {
		return err
	}
	for _, a := range acts {
		if a.Op == opWatch {
			continue
		}
		r, err := resolveSelf(g, a.Path)
		if err != nil {
			return guardErr(err)
		}
		pf.self[a.Path] = r
	}
	f.gits = gitIDs(append(append(append([]string(nil), finds.Dirs...), finds.Files...), finds.Links...))
	return nil
}

// splitOwn divides the writable directories into those whose protected
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
func splitOwn(writable, ownDirs []string) (named, own []string) {
	for _, w := range writable {
		if slices.Contains(ownDirs, w) {
			own = append(own, w)
		} else {
			named = append(named, w)
		}
	}
	return named, own
}

// protectActs refuses a protected path outside every writable dir and a
// .git that is a symbolic link, and lays out the protected paths (see
// protectLayout; names only outside sandbox-run's own dirs, splitOwn) with
// kindOf. It is pure when kindOf is.
func protectActs(p policy.Policy, writable []string, pf protectFacts, kindOf func(string) hostwalk.Kind) ([]holdAction, error) {
	named, own := splitOwn(writable, pf.own)
	for _, name := range p.Protect {
		if filepath.IsAbs(name) && !policy.InsideAny(name, named) {
			why := "not inside a writable directory"
			if policy.InsideAny(name, own) {
				why = "it lies in a session's home or a shared cache, whose protected names sandbox-run does not hold (its own state, read by no host tool)"
			}
			return nil, fault.New("--protect "+name, why, "protect paths inside --workdir, a --write dir or a --home DIR")
		}
	}
	for _, l := range pf.gitLinks {
		t := pf.links[l]
		return nil, fault.New("git directory "+l+" is a symbolic link (to "+t+")",
			"git follows it, and a link cannot be held read-only in place",
			"replace the link with the directory it names, or with a file holding \"gitdir: "+t+"\"")
	}
	acts, err := layoutSplit(named, own, p.ProtectedNames(), pf.gitDirs, pf.gitFiles, kindOf)
	var le *LinkError
	if errors.As(err, &le) {
		t := pf.links[le.Path]
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
func layoutSplit(named, own, names, gitDirs, gitFiles []string, kindOf func(string) hostwalk.Kind) ([]holdAction, error) {
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

// protectActions walks writable for git directories and lays out the
// protected paths of p as protectActs does, asking the host for each kind
// (own: sandbox-run's state dirs among writable, see splitOwn). It is for
// a mechanism that keeps copies instead of binding (landlock).
func protectActions(p policy.Policy, writable, own []string) ([]holdAction, *hostwalk.GitFinds, error) {
	finds := hostwalk.FindGit(writable, hostwalk.Bounds{})
	pf := protectFacts{own: own, gitDirs: finds.Dirs, gitFiles: finds.Files, gitLinks: finds.Links, links: map[string]string{}}
	for _, l := range finds.Links {
		pf.links[l], _ = os.Readlink(l)
	}
	var ks hostwalk.Kinds
	for dir, ents := range finds.Tops {
		ks.Seed(dir, ents)
	}
	kindOf := func(p string) hostwalk.Kind {
		k := ks.Kind(p)
		if k == hostwalk.KindLink {
			pf.links[p], _ = os.Readlink(p)
		}
		return k
	}
	acts, err := protectActs(p, writable, pf, kindOf)
	return acts, finds, err
}

// pendingProtection is a started run's side of its journal: what its
// start quarantined of earlier runs, and how it settles at its end.
type pendingProtection struct {
	jdir, jpath string
	cache       string
	runID       string
	own         *journal // the run's state when it keeps no journal
	started     []Quarantined
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
	sweep   *WalkReport
	noGuard bool // protectHooks.noGuard
	// me is this process as the run's journal names it, read once for
	// the journal and both settles.
	me self
	// dryUndo, set for a dry run, undoes its set-up at finish: a dry run
	// keeps no journal, settles nothing and starts no guard.
	dryUndo func()
}

// startProtection sweeps what ended runs left to neutralise, builds the
// plan (through mk) and records the run's journal, all under the journal
// lock, so that no run starts on a path another one is quarantining.
// Without a cache directory there is no journal: the run neutralises what
// its own command created as it ends, whatever runs alongside.
func startProtection(p policy.Policy, cache, runID string, dry bool, aw io.Writer, h protectHooks, mk func() (*plan, error)) (*plan, *pendingProtection, error) {
	var pl *plan
	pend, err := startJournal(cache, runID, dry, aw, h, func() ([]string, protection, func(), error) {
		var err error
		if pl, err = mk(); err != nil {
			return nil, protection{}, nil, err
		}
		return pl.writable, pl.prot, pl.close, nil
	})
	if err != nil {
		return nil, nil, err
	}
	pl.quarantined = pend.started
	return pl, pend, nil
}

// startJournal is startProtection for any mechanism: under the journal
// lock it settles ended runs (their sweeps bounded by h), sets the run up
// through mk (its writable directories, its protection and how to undo
// the set-up) and records the run's journal; then it starts the live
// guard, whose neutralisations go to audit as they happen.
//
// A dry run (dry) only sets the run up through mk: it takes no lock,
// settles no journal, writes none and starts no guard, since no command
// runs to write anything; so it changes nothing in the writable
// directories (what ended runs left there waits for the next real run).
// Its finish only undoes mk's set-up.
func startJournal(cache, runID string, dry bool, aw io.Writer, h protectHooks, mk func() ([]string, protection, func(), error)) (*pendingProtection, error) {
	pend := &pendingProtection{cache: cache, runID: runID, jdir: journalDir(cache), bounds: h.bounds, noGuard: h.noGuard}
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
		pend.own = &journal{RunID: runID, Writable: writable, Watched: pr.watched, Gits: pr.gits, Held: pr.held, SnapshotDir: pr.snapDir}
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
		pend.jpath, err = writeJournalIn(jd, pend.jdir, j)
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
func (pend *pendingProtection) startGuard(writable []string, pr protection, aw io.Writer) {
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
	g, err := startLiveGuard(writable, pr.watched, pr.gits, q, aw, pend.runID, 0)
	if err != nil {
		pend.guardLost = err.Error()
		audit.Event(aw, pend.runID, "live_guard_incomplete", map[string]any{"why": pend.guardLost})
		return
	}
	pend.guard, pend.guardQ = g, q
}

// stopGuard stops the live guard and returns its report and what it
// quarantined.
func (pend *pendingProtection) stopGuard() (LiveGuardReport, []Quarantined) {
	if pend.guard == nil {
		return LiveGuardReport{Lost: []string{pend.guardLost}}, nil
	}
	rep := pend.guard.stop()
	rep.Started = true
	items := pend.guardQ.items
	if pend.guardTmp && len(items) == 0 {
		os.Remove(pend.guardQ.dir)
	}
	return rep, items
}

func (pend *pendingProtection) quarantine() *quarantine {
	if pend.cache != "" {
		return &quarantine{dir: filepath.Join(pend.cache, "quarantine", pend.runID), bounds: pend.bounds}
	}
	return &quarantine{bounds: pend.bounds}
}

// finish settles the run's journal (and those of ended runs that waited
// for it), adds what was quarantined to res's report and prints one line
// per item on stderr.
func (pend *pendingProtection) finish(res *Result, stderr *os.File) {
	if pend.finished {
		return
	}
	pend.finished = true
	if pend.dryUndo != nil {
		pend.dryUndo()
		return
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
	if res != nil {
		res.Report.Quarantined = append(res.Report.Quarantined, q.items...)
		res.Report.LiveGuard = &guard
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
	pend.failClosed(res, stderr)
}

// failClosed makes an incomplete sweep the run's outcome: a repository
// past the walk's bounds kept what the command wrote to its config and
// hooks, which the host's next git there would run. The report's sweep
// says what was not walked; the run exits ExitSetup (125) with the class
// ClassSweepIncomplete, whatever the command's own status (named in the
// reason), and one line on stderr says what, why and what to do.
func (pend *pendingProtection) failClosed(res *Result, stderr *os.File) {
	s := pend.sweep
	if s == nil {
		return
	}
	if res != nil {
		res.Report.Sweep = s
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
	if res != nil {
		reason := what + "; the command's own exit status was " + strconv.Itoa(res.ExitCode)
		res.ExitCode = ExitSetup
		res.Report.Exit = &Exit{Code: ExitSetup, Class: ClassSweepIncomplete, Reason: reason}
	}
}
