package plan

import (
	"errors"
	"io"
	"os"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/internal/protect"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// gatherProtect gathers what the protect layout needs: the git
// directories, .git files and .git links under the writable dirs (the
// walk), the kind of every path the layout asks about (recorded as it
// asks, never following a link) and the resolution of every path it binds
// onto itself, vetted like any bind destination.
func (f *hostFacts) gatherProtect(p policy.Policy, g *pathguard.Guard, writable []string, tops hostwalk.Tops) error {
	finds := hostwalk.FindGitFrom(writable, hostwalk.Bounds{}, tops)
	pf := &f.prot
	pf.GitDirs, pf.GitFiles, pf.GitLinks, pf.walk = finds.Dirs, finds.Files, finds.Links, finds.Report
	pf.kinds, pf.Links, pf.self = map[string]hostwalk.Kind{}, map[string]string{}, map[string]pathguard.Resolution{}
	for _, l := range finds.Links {
		pf.Links[l], _ = os.Readlink(l)
	}
	var ks hostwalk.Kinds
	for dir, ents := range finds.Tops {
		ks.Seed(dir, ents) // the writable dirs, listed once for both
	}
	record := func(p string) hostwalk.Kind {
		k := ks.Kind(p)
		pf.kinds[p] = k
		if k == hostwalk.KindLink {
			pf.Links[p], _ = os.Readlink(p)
		}
		return k
	}
	acts, err := protect.Acts(p, writable, pf.Found, record)
	if err != nil {
		return err
	}
	for _, a := range acts {
		if a.Op == protect.Watch {
			continue
		}
		r, err := resolveSelf(g, a.Path)
		if err != nil {
			return GuardErr(err)
		}
		pf.self[a.Path] = r
	}
	f.gits = protect.GitIDs(append(append(append([]string(nil), finds.Dirs...), finds.Files...), finds.Links...))
	return nil
}

// Journal is where and how a run records its protected paths (see
// package protect): the cache directory that keeps the journals (""
// keeps none), the run's id, a dry run (nothing recorded), the audit and
// the tests' hooks.
type Journal struct {
	Cache, RunID string
	Dry          bool
	Audit        io.Writer
	Hooks        protect.Hooks
}

// Start builds the run's plan for p as l asks (NewLending, its walks
// through rv's memo, nil: none) for a sandbox whose files are accessed as
// uid/gid, and records the run's journal: it sweeps what ended runs left
// to neutralise, builds the plan and records the journal all under the
// journal lock, so that no run starts on a path another one is
// quarantining. With l.Copies it keeps a copy of every protected path the
// plan holds (Prot.SnapDir, Prot.Held). Without a cache directory there
// is no journal: the run neutralises what its own command created as it
// ends, whatever runs alongside. The Pending is settled once the sandbox
// is gone.
func Start(rv *pathguard.Resolver, p policy.Policy, own []string, uid, gid int, l Layout, j Journal) (*Plan, *protect.Pending, error) {
	var pl *Plan
	pend, err := protect.Start(j.Cache, j.RunID, j.Dry, j.Audit, j.Hooks, func() ([]string, protect.State, func(), error) {
		var err error
		if pl, err = NewLending(rv, p, own, l.ByFD, l.FDBase, uid, gid, l.Size, l.Lent); err != nil {
			return nil, protect.State{}, nil, err
		}
		if !l.Copies || len(pl.Protected) == 0 {
			return pl.Writable, pl.Prot, pl.Close, nil
		}
		undo, err := keepCopies(pl, j)
		if err != nil {
			pl.Close()
			return nil, protect.State{}, nil, err
		}
		return pl.Writable, pl.Prot, undo, nil
	})
	if err != nil {
		return nil, nil, err
	}
	pl.Quarantined = pend.Started()
	return pl, pend, nil
}

// keepCopies keeps a copy of each of pl's protected paths in a snapshot
// directory of the run's, and returns what undoes the plan with them.
func keepCopies(pl *Plan, j Journal) (func(), error) {
	dir, err := protect.SnapshotDir(j.Cache, j.RunID)
	if err != nil {
		return nil, fault.New("cannot keep copies of the protected paths", err.Error(),
			"make the cache directory ($XDG_CACHE_HOME, else ~/.cache) your own and writable")
	}
	held, err := protect.Snapshot(dir, pl.Protected)
	if err != nil {
		os.RemoveAll(dir)
		fix := "check the path's permissions"
		if errors.Is(err, protect.ErrSnapBounds) {
			fix = "use --sandbox bwrap, which holds it read-only in place, or run in a directory without it"
		}
		return nil, fault.New("--sandbox landlock cannot keep a copy of a protected path", err.Error(), fix)
	}
	pl.Prot.SnapDir, pl.Prot.Held = dir, held
	return func() { pl.Close(); os.RemoveAll(dir) }, nil
}
