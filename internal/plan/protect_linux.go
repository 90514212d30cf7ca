package plan

import (
	"io"
	"os"

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

// StartProtection sweeps what ended runs left to neutralise, builds the
// plan (through mk) and records the run's journal, all under the journal
// lock, so that no run starts on a path another one is quarantining.
// Without a cache directory there is no journal: the run neutralises what
// its own command created as it ends, whatever runs alongside.
func StartProtection(p policy.Policy, cache, runID string, dry bool, aw io.Writer, h protect.Hooks, mk func() (*Plan, error)) (*Plan, *protect.Pending, error) {
	var pl *Plan
	pend, err := protect.Start(cache, runID, dry, aw, h, func() ([]string, protect.State, func(), error) {
		var err error
		if pl, err = mk(); err != nil {
			return nil, protect.State{}, nil, err
		}
		return pl.Writable, pl.Prot, pl.Close, nil
	})
	if err != nil {
		return nil, nil, err
	}
	pl.Quarantined = pend.Started()
	return pl, pend, nil
}
