package landlock

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/internal/protect"
	"github.com/sandbox-run/sandbox-run/report"
)

// Protected paths under --sandbox landlock. Landlock grants are additive
// beneath a path: under a writable directory no rule can take write
// access to a protected path away, and there is no mount to hold it. So
// every existing protected path is writable while the run lasts (the live
// window, a named loss; a missing one is the live guard's, as under
// bwrap), and the run takes part in the same journal as bwrap
// runs (protect.Start): a missing protected path is watched and what the
// command created there is quarantined; an existing one is snapshotted at
// the start, and if it differs when the journal settles (the last run on
// the directory has ended) it is quarantined and the snapshot put back;
// a git directory that did not exist at the start is stripped.

// protectPaths builds the run's plan (package plan, by path: Landlock
// binds nothing) under the journal's lock, keeps copies of the protected
// paths the plan would hold read-only, and records the run's journal.
// The plan is the one bwrap and gVisor translate: its protected paths,
// watched paths and git directories are the same three mechanisms over.
func (r *llRun) protectPaths() error {
	cache, runID := r.opts.BwrapCache, r.report.RunID
	var pr protect.State
	pend, err := protect.Start(cache, runID, r.opts.DryRun != nil, r.opts.Audit, r.opts.Protect, func() ([]string, protect.State, func(), error) {
		pl, err := plan.New(r.p, r.own, false, 0, r.uid, r.gid, true)
		if err != nil {
			return nil, protect.State{}, nil, err
		}
		r.pl, pr = pl, pl.Prot
		if len(pl.Protected) == 0 {
			return pl.Writable, pr, pl.Close, nil
		}
		if pr.SnapDir, err = protect.SnapshotDir(cache, runID); err != nil {
			pl.Close()
			return nil, protect.State{}, nil, fault.New("cannot keep copies of the protected paths", err.Error(),
				"make the cache directory ($XDG_CACHE_HOME, else ~/.cache) your own and writable")
		}
		undo := func() { pl.Close(); os.RemoveAll(pr.SnapDir) }
		if pr.Held, err = protect.Snapshot(pr.SnapDir, pl.Protected); err != nil {
			undo()
			fix := "check the path's permissions"
			if errors.Is(err, protect.ErrSnapBounds) {
				fix = "use --sandbox bwrap, which holds it read-only in place, or run in a directory without it"
			}
			return nil, protect.State{}, nil, fault.New("--sandbox landlock cannot keep a copy of a protected path", err.Error(), fix)
		}
		return pl.Writable, pr, undo, nil
	})
	if err != nil {
		return err
	}
	r.pend, r.prot = pend, pr
	return nil
}

// settleProtected settles the run's journal once the command and its
// descendants are gone (see protect.Pending.Finish): what the command
// changed at a protected path is quarantined, copies are put back, and
// each item is added to res's report (nil: the command never ran) and
// printed on stderr.
func (r *llRun) settleProtected(res *mechanism.Result) {
	if r.pend != nil {
		rep, code := res.Parts()
		r.pend.Finish(rep, code, r.opts.Stderr)
	}
}

// protectedReport states how the protected paths were handled.
func (r *llRun) protectedReport() report.Protection {
	held, watched := len(r.prot.Held), len(r.prot.Watched)
	return report.Protection{Name: "protected_paths", Configured: true,
		Detail: strconv.Itoa(held) + " existing ones kept as copies, " + strconv.Itoa(watched) +
			" missing ones watched: the existing ones writable while the run lasts (Landlock cannot hold them), what appears at a missing one moved out as it appears (the live guard); when the last run on the directory ends, changes are quarantined and the copies put back"}
}

func heldPaths(hs []protect.HeldCopy) []string {
	out := make([]string, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.Path)
	}
	return out
}

// ownName says whether pp is a protected name in one of sandbox-run's own
// state dirs, which is not held there (protect.SplitOwn); the held parts of
// a git directory there are.
func ownName(pp string, own []string) bool {
	for _, o := range own {
		if rel, err := filepath.Rel(o, pp); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return rel != ".git" && !strings.HasPrefix(rel, ".git/")
		}
	}
	return false
}
